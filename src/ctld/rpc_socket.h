// The controller's unary calls over its Unix socket without gRPC (net/rpc_frames.h): one
// thread with an event loop reads the calls of every such connection and writes their
// answers; the calls themselves run on a few threads that take their users in turn
// (FairCallPool), through the same Controller methods (and checks) as gRPC's RpcService
// (rpc_socket_calls.h), as the caller SO_PEERCRED names. One call at a time per
// connection: the next is read once the answer is written. A `watch` call takes its
// connection to a thread of its own for as long as the stream lasts, as gRPC's synchronous
// server does; the loop no longer reads it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "ctld/controller.h"
#include "ctld/fair_call_pool.h"
#include "ctld/rpc_socket_calls.h"
#include "net/rpc_frames.h"
#include "util/event_loop.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::ctld {

class RpcSocketServer {
 public:
  struct Limits {
    size_t max_request = 0;          // the largest call frame a client may send
    size_t per_user = 64;            // connections one user (not root) holds at once
    size_t per_user_bytes = 0;       // of calls being received, one user's at once (0: 2 x max_request)
    size_t per_user_answers = 0;     // of answers not yet read, one user's at once (0: 2 x max_answer)
    size_t max_answer = 256u << 20;  // an answer larger than this is refused
    double idle_seconds = 60;        // a connection with no call in flight is closed after this
    double partial_seconds = 10;     // to finish sending a call once begun
    double sweep_seconds = 1;        // how often the deadlines above are checked
    size_t threads = 4;              // running calls at once
    size_t watches = 512;            // watch streams at once, all users (each holds a thread)
  };
  // What a call does: call_controller (rpc_socket_calls.h) in corrald. Thread-safe.
  using Dispatch = std::function<Status(const Caller&, net::RpcMethod, std::string_view request, std::string* reply)>;
  // What a watch call does: watch_controller (rpc_socket_calls.h) in corrald.
  using Watch = std::function<Status(const Caller&, std::string_view request, WatchSink& sink)>;
  static Result<std::unique_ptr<RpcSocketServer>> start(Dispatch dispatch, Watch watch, const Limits& limits);
  // Use start(); public for make_unique.
  RpcSocketServer(Dispatch dispatch, Watch watch, const Limits& limits, std::unique_ptr<EventLoop> loop);
  ~RpcSocketServer();  // stops the thread, closes every connection
  RpcSocketServer(const RpcSocketServer&) = delete;
  RpcSocketServer& operator=(const RpcSocketServer&) = delete;

  // Any thread: serves a connection of `caller` whose preface was read.
  void adopt(UniqueFd fd, Caller caller);

 private:
  struct Conn;
  struct PerUser {
    size_t conns = 0;
    size_t bytes = 0;    // buffered of calls not yet whole
    size_t answers = 0;  // of answers not yet written
  };
  void take(UniqueFd fd, Caller caller);
  void on_events(uint64_t id, uint32_t events);
  // Reads what is there; false once the connection was closed.
  bool read_some(Conn& c);
  // Answers the calls received whole, one at a time: the next once the answer is written.
  // False once the connection was closed.
  bool answer_calls(Conn& c);
  void answer(Conn& c, std::string_view payload);
  // The connection becomes a watch stream on a thread of its own (serve_watch).
  void start_watch(Conn& c, std::string_view request);
  void serve_watch(Caller caller, UniqueFd fd, std::string request);
  void end_watch(uint64_t id);
  // Loop thread: the answer of the call that `id` had running; `sent` bytes of `framed`
  // were written by the call's thread (none: the answer is framed here).
  void finish_call(uint64_t id, std::string&& framed, size_t sent, Status st, std::string&& reply);
  std::string frame_answer(Status st, const std::string& reply, uint32_t uid, size_t waiting) const;
  void refuse(Conn& c, int code, std::string_view message);
  void account(Conn& c);  // the user's bytes after c's reader or answer changed
  // Writes what is queued; false once the connection was closed.
  bool flush(Conn& c);
  void watch(Conn& c);
  void close(uint64_t id);
  void sweep();

  Dispatch dispatch_;
  Watch watch_;
  Limits limits_;
  std::atomic<bool> stopping_{false};                   // watches end at their next look
  std::unordered_map<uint64_t, std::thread> watchers_;  // loop thread only
  std::unique_ptr<EventLoop> loop_;
  FairCallPool pool_;  // after loop_: its threads post there until they are joined
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<uint32_t, PerUser> per_uid_;
  uint64_t next_id_ = 1;
  std::thread thread_;
};

}  // namespace corral::ctld
