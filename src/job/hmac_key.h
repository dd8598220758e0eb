// Secret keys for signing credentials: generation, text forms (hex, base64url), HMAC-SHA256,
// and cluster key files, which must be private to their owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::job {

inline constexpr size_t kKeyBytes = 32;     // what generate_key() makes by default
inline constexpr size_t kMinKeyBytes = 16;  // shortest key load_key_file() accepts

// Bytes from the kernel's CSPRNG (getrandom); errors only if it cannot give them.
Result<std::string> random_bytes(size_t n);
Result<std::string> generate_key(size_t n = kKeyBytes);
Result<uint64_t> random_nonce();

std::string to_hex(std::string_view bytes);  // lower case
Result<std::string> from_hex(std::string_view text);

// RFC 4648 section 5 alphabet without padding; decoding refuses '=', other alphabets and
// non-canonical trailing bits, so every byte string has exactly one accepted text form.
std::string base64url_encode(std::string_view bytes);
Result<std::string> base64url_decode(std::string_view text);

// 32 raw bytes (hmac_sha256.cc). Empty only if OpenSSL fails (out of memory), which never
// compares equal to a real MAC in equal_macs().
std::string hmac_sha256(std::string_view key, std::string_view data);

// Constant-time comparison, so a forger cannot learn a MAC byte by byte from timing.
bool equal_macs(std::string_view a, std::string_view b);

// Reads a key written as hex digits (surrounding whitespace ignored). Refuses a file that
// group or others may access, or that is owned by someone other than root or this user,
// naming the file and its mode.
Result<std::string> load_key_file(const std::string& path);

// Creates the file (it must not exist) with mode 0600 and the key in hex.
Status write_key_file(const std::string& path, std::string_view key);

}  // namespace corral::job
