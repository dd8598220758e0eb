#include "net/munge_cred.h"

#include <arpa/inet.h>
#include <munge.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <memory>
#include <optional>

#include <fmt/format.h>

namespace corral::net {

namespace {

struct CtxFree {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxFree>;
struct MemFree {
  void operator()(void* p) const { ::free(p); }
};

Result<Ctx> context(const std::string& socket) {
  Ctx ctx(munge_ctx_create());
  if (!ctx) return Error{Errc::internal, "MUNGE: cannot create a context (out of memory)"};
  if (!socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS)
    return Error{Errc::internal, fmt::format("MUNGE: cannot use socket {}: {}", socket, munge_ctx_strerror(ctx.get()))};
  return ctx;
}

std::string where(const std::string& socket) { return socket.empty() ? std::string(kDefaultMungeSocket) : socket; }

Result<std::string> encode(Ctx ctx, const std::string& socket, std::string_view payload) {
  char* cred = nullptr;
  const munge_err_t err = ::munge_encode(&cred, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  std::unique_ptr<char, MemFree> owned(cred);
  if (err != EMUNGE_SUCCESS) {
    const Errc code = err == EMUNGE_SOCKET ? Errc::unavailable : Errc::internal;
    return Error{code,
                 fmt::format("MUNGE credential from munged at {}: {}", where(socket), munge_ctx_strerror(ctx.get()))};
  }
  return std::string(cred);
}

// Decodes `cred`; its payload must start with `prefix` (and be only that unless `rest`).
Result<Identity> decode(const std::string& socket, std::string_view cred, std::string_view prefix, std::string* rest) {
  if (cred.empty()) return denied("no MUNGE credential");
  if (cred.size() > kMaxMungeCredential) return denied("the MUNGE credential is too long");
  auto ctx = context(socket);
  if (!ctx) return ctx.error();
  const std::string text(cred);  // NUL-terminated for libmunge
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t err = ::munge_decode(text.c_str(), ctx->get(), &buf, &len, &uid, &gid);
  std::unique_ptr<void, MemFree> owned(buf);
  if (err == EMUNGE_SOCKET)
    return Error{Errc::unavailable, fmt::format("cannot check the MUNGE credential: munged at {}: {}", where(socket),
                                                munge_ctx_strerror(ctx->get()))};
  if (err != EMUNGE_SUCCESS) return denied(fmt::format("MUNGE credential refused: {}", munge_ctx_strerror(ctx->get())));
  const std::string_view got(static_cast<const char*>(buf), buf == nullptr ? 0 : static_cast<size_t>(len));
  if (got.substr(0, prefix.size()) != prefix || (rest == nullptr && got.size() != prefix.size()))
    return denied("the MUNGE credential was not made for a corral request");
  if (rest != nullptr) rest->assign(got.substr(prefix.size()));
  Identity id{static_cast<uint32_t>(uid), static_cast<uint32_t>(gid), {}};
  struct in_addr addr {};
  char dotted[INET_ADDRSTRLEN] = {};
  if (munge_ctx_get(ctx->get(), MUNGE_OPT_ADDR4, &addr) == EMUNGE_SUCCESS && addr.s_addr != 0 &&
      ::inet_ntop(AF_INET, &addr, dotted, sizeof dotted) != nullptr)
    id.origin = dotted;
  return id;
}

// `restrict_uid`: MUNGE_OPT_UID_RESTRICTION, so munged decodes it for that uid alone.
Result<std::string> make(const std::string& socket, std::string_view payload, std::optional<uint32_t> restrict_uid) {
  auto ctx = context(socket);
  if (!ctx) return ctx.error();
  if (restrict_uid &&
      munge_ctx_set(ctx->get(), MUNGE_OPT_UID_RESTRICTION, static_cast<uid_t>(*restrict_uid)) != EMUNGE_SUCCESS)
    return Error{Errc::internal, fmt::format("MUNGE: cannot restrict a credential to uid {}: {}", *restrict_uid,
                                             munge_ctx_strerror(ctx->get()))};
  return encode(std::move(*ctx), socket, payload);
}

class MungeCredentials final : public Credentials {
 public:
  explicit MungeCredentials(std::string socket) : socket_(std::move(socket)) {}
  std::string_view name() const override { return "MUNGE"; }
  std::string_view source() const override { return "a credential from munged with the site's key"; }
  Result<std::string> encode(std::string_view payload) override { return make(socket_, payload, std::nullopt); }
  Result<std::string> encode_for(std::string_view payload, uint32_t uid) override {
    return make(socket_, payload, uid);
  }
  Result<Identity> decode(std::string_view cred, std::string_view prefix, std::string* rest) override {
    return net::decode(socket_, cred, prefix, rest);
  }

 private:
  std::string socket_;
};

}  // namespace

std::unique_ptr<Credentials> munge_credentials(std::string socket) {
  return std::make_unique<MungeCredentials>(std::move(socket));
}

}  // namespace corral::net
