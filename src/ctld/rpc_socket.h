// The controller's unary calls over its Unix socket without gRPC (net/rpc_frames.h): one
// thread with an event loop reads the calls of every such connection and answers them
// through the same Controller methods (and checks) as gRPC's RpcService, as the caller
// SO_PEERCRED names. A call runs on this thread; the controller's one lock serialises
// them with everything else anyway, and gRPC keeps serving its own clients meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>

#include "ctld/controller.h"
#include "util/event_loop.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::ctld {

class RpcSocketServer {
 public:
  struct Limits {
    size_t max_request = 0;       // the largest call frame a client may send
    size_t per_user = 64;         // connections one user (not root) holds at once
    size_t per_user_bytes = 0;    // of calls being received, one user's at once (0: 2 x max_request)
    double idle_seconds = 60;     // a connection with no call in flight is closed after this
    double partial_seconds = 10;  // to finish sending a call once begun
    double sweep_seconds = 1;     // how often the deadlines above are checked
  };
  static Result<std::unique_ptr<RpcSocketServer>> start(Controller& ctl, const Limits& limits);
  // Use start(); public for make_unique.
  RpcSocketServer(Controller& ctl, const Limits& limits, std::unique_ptr<EventLoop> loop);
  ~RpcSocketServer();  // stops the thread, closes every connection
  RpcSocketServer(const RpcSocketServer&) = delete;
  RpcSocketServer& operator=(const RpcSocketServer&) = delete;

  // Any thread: serves a connection of `caller` whose preface was read.
  void adopt(UniqueFd fd, Caller caller);

 private:
  struct Conn;
  struct PerUser {
    size_t conns = 0;
    size_t bytes = 0;  // buffered of calls not yet whole
  };
  void take(UniqueFd fd, Caller caller);
  void on_events(uint64_t id, uint32_t events);
  // Reads what is there; false once the connection was closed.
  bool read_some(Conn& c);
  // Answers the calls received whole, one at a time: the next once the answer is written.
  // False once the connection was closed.
  bool answer_calls(Conn& c);
  void answer(Conn& c, std::string_view payload);
  void refuse(Conn& c, int code, std::string_view message);
  void account(Conn& c);  // the user's buffered bytes after c's reader changed
  // Writes what is queued; false once the connection was closed.
  bool flush(Conn& c);
  void watch(Conn& c);
  void close(uint64_t id);
  void sweep();

  Controller& ctl_;
  Limits limits_;
  std::unique_ptr<EventLoop> loop_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<uint32_t, PerUser> per_uid_;
  uint64_t next_id_ = 1;
  std::thread thread_;
};

}  // namespace corral::ctld
