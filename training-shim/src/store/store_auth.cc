#include "store/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>

namespace star::shim {
namespace {

using Digest = std::array<unsigned char, 32>;

// SHA-256 of `s`; false if OpenSSL fails (then nothing matches).
bool Sha256(const std::string& s, Digest* out) {
  unsigned int len = 0;
  return EVP_Digest(s.data(), s.size(), out->data(), &len, EVP_sha256(), nullptr) == 1 &&
         len == out->size();
}

}  // namespace

bool BearerMatches(const std::string& authorization, const std::string& token) {
  Digest got{};
  Digest want{};
  if (!Sha256(authorization, &got) || !Sha256("Bearer " + token, &want)) return false;
  return CRYPTO_memcmp(got.data(), want.data(), got.size()) == 0;
}

}  // namespace star::shim
