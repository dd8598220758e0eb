// The agent stream without gRPC (net/agent_frames.h) on corrald's Unix socket: a thread
// reads each agent's messages and a second writes its link's batches, as AgentService
// does for a gRPC stream, through the same Controller calls and checks.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <thread>

#include "ctld/controller.h"
#include "net/frame_channel.h"
#include "util/thread_annotations.h"
#include "util/unique_fd.h"

namespace corral::ctld {

class AgentSocketServer {
 public:
  // Connections at once (only root and the instance owner get this far).
  static constexpr size_t kMaxConnections = 1024;
  // The registration must come this soon after the preface.
  static constexpr int kRegisterWithinMs = 10'000;

  explicit AgentSocketServer(Controller& ctl) : ctl_(ctl) {}
  ~AgentSocketServer();  // ends every connection and waits for its threads
  AgentSocketServer(const AgentSocketServer&) = delete;
  AgentSocketServer& operator=(const AgentSocketServer&) = delete;

  // The listener's thread: a connection of `caller` whose preface was read. Anyone but
  // an agent's uid is told so and closed, without a thread.
  void adopt(UniqueFd fd, const Caller& caller);

 private:
  struct Conn {
    std::unique_ptr<net::FrameChannel> channel;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void serve(Conn& conn, const Caller& caller);
  void reap() CORRAL_REQUIRES(mu_);  // joins the threads of connections that ended

  Controller& ctl_;
  Mutex mu_;
  std::list<Conn> conns_ CORRAL_GUARDED_BY(mu_);
  bool stopping_ CORRAL_GUARDED_BY(mu_) = false;
};

}  // namespace corral::ctld
