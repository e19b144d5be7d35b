// PEM inputs of the report endpoint, checked on scratch OpenSSL contexts.
#include "star/report/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "tls_context.h"

namespace star::report {

StatusOr<std::string> ReadPemFile(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("cannot read \"\": no file named");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read \"" + path + "\": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::InvalidArgument("cannot read \"" + path + "\": " + std::strerror(errno));
  return text.str();
}

Status CheckServerCertificate(const std::string& cert_file, const std::string& key_file,
                              const std::string& cert_option, const std::string& key_option) {
  if (cert_file.empty() && key_file.empty()) return Status::Ok();  // plain HTTP
  return tls::ReadServerIdentity(cert_option, cert_file, key_option, key_file).status();
}

Status CheckCaBundle(const std::string& pem) {
  boost::asio::ssl::context scratch(boost::asio::ssl::context::tls_client);
  return tls::TrustOnly(scratch, pem);
}

bool LooksLikePem(const std::string& value) {
  const auto start = value.find_first_not_of(" \t\r\n");
  return start != std::string::npos && value.compare(start, 10, "-----BEGIN") == 0;
}

std::string FirstCertificateSubject(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                BIO_free);
  if (bio == nullptr) return "";
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                   X509_free);
  ERR_clear_error();
  if (cert == nullptr) return "";
  char name[256] = {0};
  X509_NAME_oneline(X509_get_subject_name(cert.get()), name, sizeof name);
  return name;
}

}  // namespace star::report
