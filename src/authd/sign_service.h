// corral-authd's one call: a cluster-key credential (net/cluster_cred.h) for the local
// process at the other end of the Unix socket, in the uid and gid the kernel gives for the
// connection (SO_PEERCRED, through net::PeerListener). The caller chooses only the payload
// and who may read it; nothing it sends can change who the credential says it is.
#pragma once

#include <cstdint>
#include <string>

#include "corral.grpc.pb.h"
#include "net/peer_listener.h"

namespace corral::authd {

class SignService final : public v1::Auth::Service {
 public:
  // `origin`: this host's address, put in every credential (net::this_host_origin()).
  SignService(const net::PeerListener& peers, std::string key, std::string origin)
      : peers_(peers), key_(std::move(key)), origin_(std::move(origin)) {}

  grpc::Status Sign(grpc::ServerContext* ctx, const v1::SignRequest* req, v1::SignReply* rep) override;

 private:
  const net::PeerListener& peers_;
  const std::string key_;
  const std::string origin_;
};

}  // namespace corral::authd
