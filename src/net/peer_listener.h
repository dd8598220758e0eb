// The controller's Unix socket. We accept connections ourselves so that the peer's
// credentials (SO_PEERCRED) become its identity, then hand each connection to gRPC.
// gRPC names such a connection "fd:N" as its peer, which is how calls find their caller.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "util/result.h"

namespace grpc {
class Server;
}

namespace corral::net {

struct PeerCred {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

class PeerListener {
 public:
  // Binds and listens on `path` (replacing a stale socket file), mode 0777: every local
  // user may connect; what they may do is decided per call from their uid.
  static Result<std::unique_ptr<PeerListener>> open(const std::string& path);
  ~PeerListener();
  PeerListener(const PeerListener&) = delete;
  PeerListener& operator=(const PeerListener&) = delete;

  void start(grpc::Server* server);  // accept loop in a thread
  void stop();
  // Credentials of the connection gRPC calls `peer` ("fd:N").
  std::optional<PeerCred> lookup(std::string_view peer) const;

 private:
  PeerListener(int fd, std::string path);
  void accept_loop(grpc::Server* server);

  int listen_fd_;
  int wake_fd_;  // eventfd to stop the accept loop
  std::string path_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<int, PeerCred> creds_;
};

}  // namespace corral::net
