// Test certificates with OpenSSL 3's EVP and X509 APIs.
#include "star/test_support/tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <stdexcept>

namespace star::test_support {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;

void Check(bool ok, const char* what) {
  if (ok) return;
  char buf[256] = {0};
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error(std::string("test TLS: ") + what + ": " + buf);
}

KeyPtr NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  Check(key != nullptr, "EVP_EC_gen");
  return key;
}

std::string ToPem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  Check(PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string ToPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  Check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

void AddName(X509_NAME* name, const char* field, const std::string& value) {
  Check(X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0) == 1,
        "X509_NAME_add_entry_by_txt");
}

void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  Check(added == 1, "X509_add_ext");
}

// A certificate for `key` with `subject`, valid from an hour ago for a day; unsigned.
CertPtr NewCert(EVP_PKEY* key, X509_NAME* subject) {
  static std::atomic<long> serial{1};
  CertPtr cert(X509_new(), X509_free);
  Check(cert != nullptr, "X509_new");
  Check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");
  Check(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++) == 1, "ASN1_INTEGER_set");
  Check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr, "X509_gmtime_adj");
  Check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600) != nullptr, "X509_gmtime_adj");
  Check(X509_set_subject_name(cert.get(), subject) == 1, "X509_set_subject_name");
  Check(X509_set_pubkey(cert.get(), key) == 1, "X509_set_pubkey");
  return cert;
}

std::string AltNames(const std::vector<std::string>& dns_names, const std::vector<std::string>& ips) {
  std::string out;
  for (const auto& d : dns_names) out += (out.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : ips) out += (out.empty() ? "" : ",") + std::string("IP:") + ip;
  return out;
}

}  // namespace

struct TestCa::Impl {
  KeyPtr key{nullptr, EVP_PKEY_free};
  CertPtr cert{nullptr, X509_free};
  std::string pem;

  CertifiedKey Issue(X509_NAME* subject, const std::string& usage, const std::string& alt_names) const {
    KeyPtr leaf_key = NewKey();
    CertPtr leaf = NewCert(leaf_key.get(), subject);
    Check(X509_set_issuer_name(leaf.get(), X509_get_subject_name(cert.get())) == 1, "X509_set_issuer_name");
    AddExtension(leaf.get(), cert.get(), NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(leaf.get(), cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
    AddExtension(leaf.get(), cert.get(), NID_ext_key_usage, usage);
    AddExtension(leaf.get(), cert.get(), NID_authority_key_identifier, "keyid:always");
    if (!alt_names.empty()) AddExtension(leaf.get(), cert.get(), NID_subject_alt_name, alt_names);
    Check(X509_sign(leaf.get(), key.get(), EVP_sha256()) > 0, "X509_sign");
    return {ToPem(leaf.get()), ToPem(leaf_key.get())};
  }
};

TestCa::TestCa(const std::string& common_name) : impl_(std::make_unique<Impl>()) {
  impl_->key = NewKey();
  std::unique_ptr<X509_NAME, decltype(&X509_NAME_free)> name(X509_NAME_new(), X509_NAME_free);
  AddName(name.get(), "CN", common_name);
  impl_->cert = NewCert(impl_->key.get(), name.get());
  X509* cert = impl_->cert.get();
  Check(X509_set_issuer_name(cert, name.get()) == 1, "X509_set_issuer_name");
  AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert, cert, NID_subject_key_identifier, "hash");
  Check(X509_sign(cert, impl_->key.get(), EVP_sha256()) > 0, "X509_sign");
  impl_->pem = ToPem(cert);
}

TestCa::~TestCa() = default;

const std::string& TestCa::cert_pem() const { return impl_->pem; }

CertifiedKey TestCa::IssueServer(const std::vector<std::string>& dns_names, const std::vector<std::string>& ips) const {
  std::unique_ptr<X509_NAME, decltype(&X509_NAME_free)> name(X509_NAME_new(), X509_NAME_free);
  AddName(name.get(), "CN", dns_names.empty() ? (ips.empty() ? "server" : ips[0]) : dns_names[0]);
  return impl_->Issue(name.get(), "serverAuth", AltNames(dns_names, ips));
}

CertifiedKey TestCa::IssueClient(const std::string& user, const std::vector<std::string>& groups) const {
  std::unique_ptr<X509_NAME, decltype(&X509_NAME_free)> name(X509_NAME_new(), X509_NAME_free);
  for (const auto& g : groups) AddName(name.get(), "O", g);
  AddName(name.get(), "CN", user);
  return impl_->Issue(name.get(), "clientAuth", "");
}

std::string WriteTextFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("test TLS: cannot write " + path);
  }
  ::chmod(path.c_str(), 0600);
  return path;
}

}  // namespace star::test_support
