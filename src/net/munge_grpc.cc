#include "net/munge_grpc.h"

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

namespace corral::net {

bool over_network(std::string_view target) { return target.rfind("unix:", 0) != 0; }

Status add_credential(grpc::ClientContext& ctx, std::string_view target, const std::string& munge_socket,
                      std::string_view payload) {
  if (!over_network(target)) return {};
  auto cred = munge_encode(munge_socket, payload);
  if (!cred) return cred.error();
  ctx.AddMetadata(std::string(kMungeMetadataKey), *cred);
  return {};
}

Result<MungeIdentity> caller_of(const grpc::ServerContextBase& ctx, const std::string& munge_socket) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(kMungeMetadataKey.data(), kMungeMetadataKey.size()));
  if (it == md.end()) return denied("the request carries no MUNGE credential");
  return munge_decode(munge_socket, std::string_view(it->second.data(), it->second.size()), kMungeRequestPayload);
}

}  // namespace corral::net
