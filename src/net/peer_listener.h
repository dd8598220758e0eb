// A daemon's Unix socket. We accept connections ourselves so that the peer's
// credentials (SO_PEERCRED) become its identity, then hand each connection to gRPC.
// gRPC names such a connection "fd:N" as its peer, which is how calls find their caller;
// PeerTable makes sure N names that one connection (see peer_table.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/peer_table.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace grpc {
class Server;
}

namespace corral::net {

class PeerListener {
 public:
  // Binds and listens on `path` (replacing a stale socket file), mode 0777: every local
  // user may connect; what they may do is decided per call from their uid.
  // `fd_limit` is the process's descriptor limit (raise_fd_limit()).
  static Result<std::unique_ptr<PeerListener>> open(const std::string& path, size_t fd_limit);
  ~PeerListener();
  PeerListener(const PeerListener&) = delete;
  PeerListener& operator=(const PeerListener&) = delete;

  // Connections that begin with `preface` go to `handler` (called on the accept thread,
  // the preface already read off), all others to gRPC. Call before start(), once per
  // preface (none may begin another; at most 64 bytes). A connection
  // that sends nothing within kDecideWithin is closed; of more than kMaxUndecided such,
  // the oldest is.
  using Handler = std::function<void(UniqueFd fd, const PeerCred& cred)>;
  void divert(std::string preface, Handler handler);
  static constexpr auto kDecideWithin = std::chrono::seconds(10);
  static constexpr size_t kMaxUndecided = 256;

  void start(grpc::Server* server);  // accept loop in a thread
  void stop();
  // Credentials of the connection gRPC calls `peer` ("fd:N").
  std::optional<PeerCred> lookup(std::string_view peer) const;

 private:
  PeerListener(int fd, std::string path, size_t fd_limit);
  void accept_loop(grpc::Server* server);
  struct Undecided {
    UniqueFd fd;
    PeerCred cred;
    std::chrono::steady_clock::time_point deadline;
  };
  // Reads the start of `u`: true once it went to gRPC or the handler (or was closed).
  bool decide(Undecided& u, grpc::Server* server);
  // Out of descriptors or memory: wait (or stop) rather than spin on a ready socket.
  bool back_off(int err);

  int listen_fd_;
  int wake_fd_;  // eventfd to stop the accept loop
  std::string path_;
  std::thread thread_;
  PeerTable peers_;
  struct Diversion {
    std::string preface;
    Handler handler;
  };
  std::vector<Diversion> diversions_;
};

}  // namespace corral::net
