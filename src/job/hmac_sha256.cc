// HMAC-SHA256 and the comparison of MACs (job/hmac_key.h), apart from the rest of the key
// code so that a program that only makes or reads keys (the corral command) links no
// OpenSSL.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <climits>

#include "job/hmac_key.h"

namespace corral::job {

std::string hmac_sha256(std::string_view key, std::string_view data) {
  static constexpr unsigned char kNoBytes[1] = {0};  // OpenSSL wants a pointer even for ""
  const void* k = key.empty() ? static_cast<const void*>(kNoBytes) : key.data();
  const auto* d = data.empty() ? kNoBytes : reinterpret_cast<const unsigned char*>(data.data());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (key.size() > static_cast<size_t>(INT_MAX) ||
      HMAC(EVP_sha256(), k, static_cast<int>(key.size()), d, data.size(), out, &len) == nullptr) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

bool equal_macs(std::string_view a, std::string_view b) {
  // Lengths are public (always 32 for a well-formed token), so comparing them first leaks nothing.
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace corral::job
