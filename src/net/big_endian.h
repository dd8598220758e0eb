// Integers in corral's binary credentials and corral-authd's requests: big-endian, a
// fixed number of bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace corral::net {

// Appends the low `bytes` bytes of `v`, most significant first.
inline void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads `bytes` bytes at `at` (the caller has checked they are there).
inline uint64_t get_be(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

}  // namespace corral::net
