// The report endpoint's own CA and serving certificate, with OpenSSL 3's EVP and X509 APIs.
#include "star/report/certificate.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>

#include "tls_context.h"

namespace star::report {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;
using NamePtr = std::unique_ptr<X509_NAME, decltype(&X509_NAME_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

// Internal "OPENSSL_CALL: reason" unless `ok`.
Status Check(bool ok, const char* call) {
  if (ok) return Status::Ok();
  char reason[256] = {0};
  ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
  ERR_clear_error();
  return Status::Internal(std::string("report certificate: ") + call + ": " + reason);
}

bool IsIp(const std::string& host) {
  unsigned char addr[16];
  return inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

StatusOr<std::string> Pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  STAR_RETURN_IF_ERROR(Check(bio && PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509"));
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

StatusOr<std::string> Pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  STAR_RETURN_IF_ERROR(Check(bio && PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
                             "PEM_write_bio_PrivateKey"));
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  STAR_RETURN_IF_ERROR(Check(ext != nullptr, "X509V3_EXT_conf_nid"));
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return Check(added == 1, "X509_add_ext");
}

// An unsigned certificate for `key` named CN=`common_name`, issued by `issuer` (itself
// when null), valid from an hour ago for `validity`, with a random 128-bit serial.
StatusOr<CertPtr> NewCert(EVP_PKEY* key, const std::string& common_name, X509* issuer, std::chrono::hours validity) {
  CertPtr cert(X509_new(), X509_free);
  STAR_RETURN_IF_ERROR(Check(cert != nullptr, "X509_new"));
  STAR_RETURN_IF_ERROR(Check(X509_set_version(cert.get(), 2) == 1, "X509_set_version"));
  unsigned char serial[16];
  STAR_RETURN_IF_ERROR(Check(RAND_bytes(serial, sizeof serial) == 1, "RAND_bytes"));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool serial_set = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  STAR_RETURN_IF_ERROR(Check(serial_set, "BN_to_ASN1_INTEGER"));
  const long seconds = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(validity).count());
  STAR_RETURN_IF_ERROR(Check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr, "X509_gmtime_adj"));
  STAR_RETURN_IF_ERROR(Check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), seconds) != nullptr, "X509_gmtime_adj"));
  NamePtr name(X509_NAME_new(), X509_NAME_free);
  STAR_RETURN_IF_ERROR(Check(name && X509_NAME_add_entry_by_txt(name.get(), "CN", MBSTRING_UTF8,
                                                                reinterpret_cast<const unsigned char*>(common_name.c_str()),
                                                                -1, -1, 0) == 1,
                             "X509_NAME_add_entry_by_txt"));
  STAR_RETURN_IF_ERROR(Check(X509_set_subject_name(cert.get(), name.get()) == 1, "X509_set_subject_name"));
  X509_NAME* issuer_name = issuer != nullptr ? X509_get_subject_name(issuer) : name.get();
  STAR_RETURN_IF_ERROR(Check(X509_set_issuer_name(cert.get(), issuer_name) == 1, "X509_set_issuer_name"));
  STAR_RETURN_IF_ERROR(Check(X509_set_pubkey(cert.get(), key) == 1, "X509_set_pubkey"));
  return cert;
}

StatusOr<CertPtr> ReadCert(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
  ERR_clear_error();
  if (cert == nullptr) return Status::FailedPrecondition(what + ": not a PEM certificate");
  return cert;
}

}  // namespace

StatusOr<ServingCertificate> IssueServingCertificate(const std::vector<std::string>& hosts,
                                                     std::chrono::hours validity) {
  if (hosts.empty()) return Status::InvalidArgument("hosts: at least one is needed");
  std::string alt_names;
  for (const std::string& h : hosts) {
    if (h.empty()) return Status::InvalidArgument("hosts: an empty host name");
    alt_names += (alt_names.empty() ? "" : ",") + std::string(IsIp(h) ? "IP:" : "DNS:") + h;
  }
  if (validity.count() <= 0) return Status::InvalidArgument("validity: must be positive");
  KeyPtr ca_key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  KeyPtr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  STAR_RETURN_IF_ERROR(Check(ca_key != nullptr && key != nullptr, "EVP_EC_gen"));

  STAR_ASSIGN_OR_RETURN(CertPtr ca, NewCert(ca_key.get(), "star-report-ca", nullptr, validity));
  STAR_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  STAR_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  STAR_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
  STAR_RETURN_IF_ERROR(Check(X509_sign(ca.get(), ca_key.get(), EVP_sha256()) > 0, "X509_sign"));

  STAR_ASSIGN_OR_RETURN(CertPtr leaf, NewCert(key.get(), hosts.front(), ca.get(), validity));
  STAR_RETURN_IF_ERROR(AddExtension(leaf.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  STAR_RETURN_IF_ERROR(AddExtension(leaf.get(), ca.get(), NID_key_usage, "critical,digitalSignature"));
  STAR_RETURN_IF_ERROR(AddExtension(leaf.get(), ca.get(), NID_ext_key_usage, "serverAuth"));
  STAR_RETURN_IF_ERROR(AddExtension(leaf.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  STAR_RETURN_IF_ERROR(AddExtension(leaf.get(), ca.get(), NID_subject_alt_name, alt_names));
  STAR_RETURN_IF_ERROR(Check(X509_sign(leaf.get(), ca_key.get(), EVP_sha256()) > 0, "X509_sign"));

  ServingCertificate out;
  STAR_ASSIGN_OR_RETURN(out.ca_pem, Pem(ca.get()));
  STAR_ASSIGN_OR_RETURN(out.cert_pem, Pem(leaf.get()));
  STAR_ASSIGN_OR_RETURN(out.key_pem, Pem(key.get()));
  return out;
}

Status CheckServingCertificate(const ServingCertificate& c, const std::vector<std::string>& hosts,
                               std::chrono::seconds margin) {
  StatusOr<tls::ServerIdentity> identity = tls::ServerIdentityFromPem("tls.crt", c.cert_pem, "tls.key", c.key_pem);
  if (!identity.ok()) return Status::FailedPrecondition(identity.status().message());
  STAR_ASSIGN_OR_RETURN(CertPtr ca, ReadCert(c.ca_pem, "ca.crt"));
  STAR_ASSIGN_OR_RETURN(CertPtr leaf, ReadCert(c.cert_pem, "tls.crt"));
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  const bool signed_by_ca = ca_key != nullptr && X509_verify(leaf.get(), ca_key) == 1;
  ERR_clear_error();
  if (!signed_by_ca) return Status::FailedPrecondition("tls.crt: is not signed by the CA ca.crt");
  std::time_t until = std::time(nullptr) + static_cast<std::time_t>(margin.count());
  for (X509* cert : {leaf.get(), ca.get()}) {
    if (X509_cmp_time(X509_get0_notAfter(cert), &until) <= 0) {
      return Status::FailedPrecondition(std::string(cert == ca.get() ? "ca.crt" : "tls.crt") + ": expires within " +
                                        std::to_string(margin.count()) + "s");
    }
  }
  for (const std::string& h : hosts) {
    const int named = IsIp(h) ? X509_check_ip_asc(leaf.get(), h.c_str(), 0)
                              : X509_check_host(leaf.get(), h.c_str(), h.size(), X509_CHECK_FLAG_NO_WILDCARDS, nullptr);
    if (named != 1) return Status::FailedPrecondition("tls.crt: does not name host " + h);
  }
  return Status::Ok();
}

}  // namespace star::report
