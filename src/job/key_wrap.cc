#include "job/key_wrap.h"

#include <openssl/evp.h>

#include <memory>

namespace corral::job {

namespace {

constexpr size_t kKekBytes = 32;
constexpr size_t kWrapBlock = 8;
constexpr size_t kMaxKeyBytes = 1024;  // keys are tens of bytes; more is a mistake

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

// One pass of AES-256-WRAP in either direction; empty on failure.
std::string run(std::string_view kek, std::string_view in, bool encrypt) {
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return {};
  EVP_CIPHER_CTX_set_flags(ctx.get(), EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
  const auto* k = reinterpret_cast<const unsigned char*>(kek.data());
  if (EVP_CipherInit_ex(ctx.get(), EVP_aes_256_wrap(), nullptr, k, nullptr, encrypt ? 1 : 0) != 1) return {};
  std::string out(in.size() + 2 * kWrapBlock, '\0');
  int n = 0, tail = 0;
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (EVP_CipherUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(in.data()),
                       static_cast<int>(in.size())) != 1 ||
      EVP_CipherFinal_ex(ctx.get(), o + n, &tail) != 1)
    return {};
  out.resize(static_cast<size_t>(n + tail));
  return out;
}

Status check_kek(std::string_view kek) {
  if (kek.size() != kKekBytes) return invalid("a key-wrapping key is 32 bytes");
  return {};
}

}  // namespace

Result<std::string> wrap_key(std::string_view kek, std::string_view key) {
  if (auto st = check_kek(kek); !st) return st.error();
  if (key.size() < 2 * kWrapBlock || key.size() % kWrapBlock != 0 || key.size() > kMaxKeyBytes)
    return invalid("a wrapped key is a multiple of 8 bytes, 16 to 1024");
  std::string out = run(kek, key, true);
  if (out.empty()) return Error{Errc::internal, "OpenSSL could not wrap the key"};
  return out;
}

Result<std::string> unwrap_key(std::string_view kek, std::string_view wrapped) {
  if (auto st = check_kek(kek); !st) return st.error();
  if (wrapped.size() < 3 * kWrapBlock || wrapped.size() % kWrapBlock != 0 || wrapped.size() > kMaxKeyBytes + kWrapBlock)
    return denied("the wrapped key has the wrong length");
  std::string out = run(kek, wrapped, false);
  if (out.empty()) return denied("the wrapped key was not made with this connection's key, or was altered");
  return out;
}

}  // namespace corral::job
