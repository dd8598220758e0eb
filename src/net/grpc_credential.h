// Credentials (net/credentials.h) on gRPC calls: the one place that knows where they
// travel, used by corrald, the agents' step service and every client of either.
#pragma once

#include <string>
#include <string_view>

#include "net/credentials.h"
#include "net/unix_connect.h"  // over_network
#include "util/result.h"

namespace grpc {
class ClientContext;
class ServerContextBase;
}  // namespace grpc

namespace corral::net {

// Client side: a fresh credential with `payload` on a call to `target`, when it goes over
// the network (nothing for a Unix socket, where the kernel names the caller).
Status add_credential(grpc::ClientContext& ctx, std::string_view target, Credentials& creds,
                      std::string_view payload = kRequestPayload);

// Server side: who sent a request from a network peer, from its credential.
Result<Identity> caller_of(const grpc::ServerContextBase& ctx, Credentials& creds);

}  // namespace corral::net
