#include "star/report/token.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <array>
#include <random>

namespace star::report {
namespace {

std::array<unsigned char, SHA256_DIGEST_LENGTH> Digest(std::string_view s) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

}  // namespace

std::string RandomToken() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token.push_back(kHex[rd() % 16]);
  return token;
}

bool TokensEqual(std::string_view presented, std::string_view expected) {
  const auto a = Digest(presented);
  const auto b = Digest(expected);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace star::report
