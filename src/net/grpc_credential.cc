#include "net/grpc_credential.h"

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

namespace corral::net {

Status add_credential(grpc::ClientContext& ctx, std::string_view target, Credentials& creds, std::string_view payload) {
  if (!over_network(target)) return {};
  auto cred = creds.encode(payload);
  if (!cred) return cred.error();
  ctx.AddMetadata(std::string(kCredentialMetadataKey), *cred);
  return {};
}

Result<Identity> caller_of(const grpc::ServerContextBase& ctx, Credentials& creds) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(kCredentialMetadataKey.data(), kCredentialMetadataKey.size()));
  if (it == md.end()) return denied(std::string("the request carries no ") + std::string(creds.name()) + " credential");
  return creds.decode(std::string_view(it->second.data(), it->second.size()), kRequestPayload, nullptr);
}

}  // namespace corral::net
