#include "authd/sign_service.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "net/cluster_cred.h"

namespace corral::authd {

grpc::Status SignService::Sign(grpc::ServerContext* ctx, const v1::SignRequest* req, v1::SignReply* rep) {
  auto peer = peers_.lookup(ctx->peer());
  if (!peer) return {grpc::StatusCode::UNAUTHENTICATED, "cannot identify the caller (connect over the Unix socket)"};
  if (req->payload().size() > net::kMaxClusterCredPayload)
    return {grpc::StatusCode::INVALID_ARGUMENT, "the payload is at most 1024 bytes"};
  net::ClusterCred cred;
  cred.uid = static_cast<uint32_t>(peer->uid);
  cred.gid = static_cast<uint32_t>(peer->gid);
  if (req->has_restrict_uid()) cred.restrict_uid = req->restrict_uid();
  cred.origin = origin_;
  cred.payload = req->payload();
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  auto sealed = net::seal_cluster_cred(key_, std::move(cred), now);
  if (!sealed) {
    spdlog::error("cannot sign for uid {}: {}", peer->uid, sealed.message());
    return {grpc::StatusCode::INTERNAL, sealed.message()};
  }
  spdlog::debug("signed a credential for uid {} (pid {})", peer->uid, peer->pid);
  rep->set_credential(std::move(*sealed));
  return grpc::Status::OK;
}

}  // namespace corral::authd
