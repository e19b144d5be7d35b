// Throwaway certificates for tests that speak TLS: a CA made on the spot (OpenSSL, EC
// P-256 keys, valid from an hour ago for a day) and the server and client certificates
// it signs. Failures throw std::runtime_error naming the OpenSSL call.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace star::test_support {

// A certificate and its private key, both PEM.
struct CertifiedKey {
  std::string cert;
  std::string key;
};

class TestCa {
 public:
  explicit TestCa(const std::string& common_name = "star-test-ca");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& cert_pem() const;

  // For a server reachable as `dns_names` and `ips` (subjectAltName; serverAuth).
  CertifiedKey IssueServer(const std::vector<std::string>& dns_names,
                           const std::vector<std::string>& ips = {"127.0.0.1"}) const;
  // For a client: CN is the user name, O the groups, as Kubernetes reads them (clientAuth).
  CertifiedKey IssueClient(const std::string& user, const std::vector<std::string>& groups = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `text` to `path` (mode 0600) and returns the path.
std::string WriteTextFile(const std::string& path, const std::string& text);

}  // namespace star::test_support
