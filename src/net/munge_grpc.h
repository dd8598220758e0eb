// MUNGE credentials on gRPC calls (net/munge_cred.h): the one place that knows where they
// travel, used by corrald, the agents' step service and every client of either.
#pragma once

#include <string>
#include <string_view>

#include "net/munge_cred.h"
#include "util/result.h"

namespace grpc {
class ClientContext;
class ServerContextBase;
}  // namespace grpc

namespace corral::net {

// True for a target reached over the network ("HOST:PORT", "ipv4:..."), false for "unix:".
bool over_network(std::string_view target);

// Client side: a fresh credential with `payload` from munged at `munge_socket` on a call
// to `target`, when it goes over the network (nothing for a Unix socket, where the kernel
// names the caller).
Status add_credential(grpc::ClientContext& ctx, std::string_view target, const std::string& munge_socket,
                      std::string_view payload = kMungeRequestPayload);

// Server side: who sent a request from a network peer, from its credential.
Result<MungeIdentity> caller_of(const grpc::ServerContextBase& ctx, const std::string& munge_socket);

}  // namespace corral::net
