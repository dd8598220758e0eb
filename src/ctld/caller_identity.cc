#include "ctld/caller_identity.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/grpc_credential.h"

namespace corral::ctld {

Result<Caller> CallerIdentity::of(grpc::ServerContext* ctx) const {
  const std::string peer = ctx->peer();
  if (auto cred = peers_.lookup(peer)) return Caller{cred->uid, cred->gid};
  if ((peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) || creds_ == nullptr)
    return denied("cannot identify the caller: connect over corrald's Unix socket");
  auto id = net::caller_of(*ctx, *creds_);
  if (!id) {
    spdlog::warn("refused a request from {}: {}", peer, id.message());
    return denied(fmt::format("{} (requests over TCP need {})", id.message(), creds_->source()));
  }
  // A credential with no origin address still marks the caller as remote: an agent then
  // can claim no node (check_node_claim), which is the safe side.
  return Caller{id->uid, id->gid, id->origin.empty() ? "unknown" : id->origin};
}

}  // namespace corral::ctld
