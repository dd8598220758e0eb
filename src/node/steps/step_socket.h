// RunStep over the agent's Unix socket without gRPC (the protocol is net/step_frames.h):
// a connection lives on the agent's event loop from its preface on, one call after
// another, so a step's request, launch and answer pass no thread hand-off, and a client
// that keeps its connection (the step API) costs no accept per step. The caller is who the
// socket's SO_PEERCRED says; everything it sends goes through the same StepManager calls
// (and checks) as gRPC's RunStep. Remote callers (TCP) keep gRPC.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "node/steps/step_manager.h"
#include "util/event_loop.h"
#include "util/unique_fd.h"

namespace corral::node {

class StepSocketServer {
 public:
  // Connections one user (not root) may hold open at once; the next is refused with
  // RESOURCE_EXHAUSTED.
  static constexpr size_t kMaxPerUser = 1024;

  // `max_message`: the largest frame a client may send; `per_user`: connections one user
  // (not root) may hold at once.
  StepSocketServer(EventLoop& loop, StepManager& steps, size_t max_message, size_t per_user = kMaxPerUser);
  ~StepSocketServer();
  StepSocketServer(const StepSocketServer&) = delete;
  StepSocketServer& operator=(const StepSocketServer&) = delete;

  // Loop thread: serves a connection of `uid` whose preface was read.
  void adopt(UniqueFd fd, uint32_t uid);
  size_t connections() const { return conns_.size(); }
  // Past this much unread output a client is taken for gone (default kMaxUnreadOutput).
  void set_max_unread_output(size_t bytes) { max_unread_ = bytes; }

 private:
  struct Conn;
  void on_events(StepManager::ClientId id, uint32_t events);
  // Reads what is there; false if the connection was closed meanwhile.
  bool read_some(Conn& c);
  // Hands the frames read so far to the step manager; false if `c` closed meanwhile.
  bool take_frames(Conn& c);
  void handle_frame(Conn& c, uint8_t type, std::string&& payload);
  bool alive(StepManager::ClientId id) const { return conns_.count(id) != 0; }
  void send(StepManager::ClientId id, v1::StepServerMessage&& msg);
  void end(Conn& c, int code, const std::string& message);
  // Writes what is queued; false if the connection was closed meanwhile.
  bool flush(Conn& c);
  void watch(Conn& c);
  void close(Conn& c);
  // The call on `c` has ended and the client may send another: `c` gets a new call id.
  void next_call(Conn& c);

  EventLoop& loop_;
  StepManager& steps_;
  size_t max_message_;
  size_t per_user_;
  size_t max_unread_ = kMaxUnreadOutput;
  std::unordered_map<StepManager::ClientId, std::unique_ptr<Conn>> conns_;
  std::unordered_map<uint32_t, size_t> per_uid_;  // open connections by uid
  // The step manager may outlive this server: its sinks check this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // gRPC's RunStep numbers its clients from 1; these never meet them.
  StepManager::ClientId next_id_ = StepManager::ClientId{1} << 62;
};

}  // namespace corral::node
