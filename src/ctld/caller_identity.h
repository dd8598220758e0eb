// Who is calling corrald: on the Unix socket the kernel says (SO_PEERCRED, captured when
// the connection was accepted); over TCP the request's credential does. Shared by the
// client API (RpcService) and the agent stream (AgentService).
#pragma once

#include <grpcpp/grpcpp.h>

#include "ctld/controller.h"
#include "net/credentials.h"
#include "net/peer_listener.h"

namespace corral::ctld {

class CallerIdentity {
 public:
  // `creds`: who requests over TCP come from (null: nobody, when corrald serves no TCP).
  CallerIdentity(const net::PeerListener& peers, net::Credentials* creds) : peers_(peers), creds_(creds) {}
  // Forged, expired and replayed credentials are refused; a refusal is logged with the
  // peer's address and the reason.
  Result<Caller> of(grpc::ServerContext* ctx) const;
  net::Credentials* credentials() const { return creds_; }

 private:
  const net::PeerListener& peers_;
  net::Credentials* creds_;
};

// The answer to a caller that could not be identified.
inline grpc::Status refused(const Result<Caller>& c) { return {grpc::StatusCode::UNAUTHENTICATED, c.message()}; }

}  // namespace corral::ctld
