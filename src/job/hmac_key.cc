#include "job/hmac_key.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace corral::job {
namespace {

constexpr std::string_view kHexDigits = "0123456789abcdef";
constexpr std::string_view kB64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr size_t kMaxKeyFileBytes = 4096;  // a key is tens of bytes; more is a wrong file

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int b64_value(char c) {
  auto pos = kB64Alphabet.find(c);
  return pos == std::string_view::npos ? -1 : static_cast<int>(pos);
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Error open_error(const std::string& path, int err) {
  std::string why = std::strerror(err);
  if (err == ENOENT) return not_found(fmt::format("key file {} does not exist", path));
  if (err == EACCES) return denied(fmt::format("cannot read key file {}: {}", path, why));
  return io_error(fmt::format("cannot open key file {}: {}", path, why));
}

// A key others can read lets them forge credentials; one others can write lets them
// replace it. Either way the file cannot be trusted.
Status check_key_file_stat(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return invalid(fmt::format("key file {} is not a regular file", path));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return denied(
        fmt::format("key file {} has mode {:04o}, which lets group or others access it; "
                    "run 'chmod 600 {}'",
                    path, st.st_mode & 07777, path));
  }
  uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    return denied(
        fmt::format("key file {} is owned by uid {}; it must be owned by root or "
                    "by uid {} (the user running this program)",
                    path, st.st_uid, me));
  }
  return {};
}

Result<std::string> read_all(const std::string& path, int fd) {
  std::string text;
  char buf[1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(fmt::format("cannot read key file {}: {}", path, std::strerror(errno)));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxKeyFileBytes) {
      return invalid(
          fmt::format("key file {} is larger than {} bytes; it should hold one "
                      "key in hex",
                      path, kMaxKeyFileBytes));
    }
  }
}

}  // namespace

// The kernel's CSPRNG: getrandom(2) blocks only until it is seeded, once after boot.
Result<std::string> random_bytes(size_t n) {
  std::string out(n, '\0');
  for (size_t done = 0; done < n;) {
    const ssize_t got = ::getrandom(out.data() + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return Error{Errc::internal, fmt::format("cannot get random bytes from the kernel: {}", std::strerror(errno))};
    done += static_cast<size_t>(got);
  }
  return out;
}

Result<std::string> generate_key(size_t n) { return random_bytes(n); }

Result<uint64_t> random_nonce() {
  auto bytes = random_bytes(sizeof(uint64_t));
  if (!bytes) return bytes.error();
  uint64_t v = 0;
  std::memcpy(&v, bytes->data(), sizeof v);
  return v;
}

std::string to_hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 0xf];
  }
  return out;
}

Result<std::string> from_hex(std::string_view text) {
  if (text.size() % 2 != 0) {
    return invalid(fmt::format("odd number of hex digits ({})", text.size()));
  }
  std::string out;
  out.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = hex_value(text[i]);
    int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) {
      size_t bad = hi < 0 ? i : i + 1;
      return invalid(fmt::format("invalid hex digit '{}' at position {}", text[bad], bad));
    }
    out += static_cast<char>((hi << 4) | lo);
  }
  return out;
}

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kB64Alphabet[(v >> shift) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 0) return out;
  uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
  if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
  out += kB64Alphabet[(v >> 18) & 63];
  out += kB64Alphabet[(v >> 12) & 63];
  if (rest == 2) out += kB64Alphabet[(v >> 6) & 63];
  return out;
}

Result<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) {
    return invalid(fmt::format("{} characters is not a valid base64url length", text.size()));
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    int v = b64_value(text[i]);
    if (v < 0) {
      return invalid(fmt::format("invalid base64url character '{}' at position {}", text[i], i));
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return invalid("non-canonical base64url ending");
  return out;
}

Result<std::string> load_key_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return open_error(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return io_error(fmt::format("cannot stat key file {}: {}", path, std::strerror(errno)));
  }
  if (auto s = check_key_file_stat(path, st); !s) return s.error();
  auto text = read_all(path, fd.get());
  if (!text) return text.error();
  auto key = from_hex(trim(*text));
  if (!key) return invalid(fmt::format("key file {} does not hold a hex key: {}", path, key.message()));
  if (key->size() < kMinKeyBytes) {
    return invalid(
        fmt::format("key file {} holds a {}-byte key; at least {} bytes ({} hex "
                    "digits) are needed",
                    path, key->size(), kMinKeyBytes, kMinKeyBytes * 2));
  }
  return key;
}

Status write_key_file(const std::string& path, std::string_view key) {
  if (key.size() < kMinKeyBytes) {
    return invalid(fmt::format("refusing to write a {}-byte key to {}; keys need at least {} bytes", key.size(), path,
                               kMinKeyBytes));
  }
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0 && errno == EEXIST) {
    return Error{Errc::already_exists,
                 fmt::format("key file {} already exists; remove it first to replace the key", path)};
  }
  if (fd.get() < 0) {
    return io_error(fmt::format("cannot create key file {}: {}", path, std::strerror(errno)));
  }
  std::string text = to_hex(key) + "\n";
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(fmt::format("cannot write key file {}: {}", path, std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) {
    return io_error(fmt::format("cannot sync key file {}: {}", path, std::strerror(errno)));
  }
  return {};
}

}  // namespace corral::job
