// One connected node agent: a queue of outgoing commands merged into batches, written
// by the stream's writer thread, and the time the agent was last heard from.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "util/thread_annotations.h"

namespace corral::ctld {

class AgentLink {
 public:
  // `cancel` ends the stream from outside (the RPC layer's call cancellation).
  AgentLink(std::string agent_id, std::vector<std::string> nodes, std::function<void()> cancel,
            std::string incarnation = {}, std::string session_key = {});

  const std::string& agent_id() const { return agent_id_; }
  const std::string& incarnation() const { return incarnation_; }
  // Wraps the keys sent to this agent (job/key_wrap.h); fixed for the connection.
  const std::string& session_key() const { return session_key_; }
  // The output number last acknowledged to this agent (under the controller's lock).
  uint64_t output_acked = 0;
  const std::vector<std::string>& nodes() const { return nodes_; }

  // Merges `msg` into the next batch (repeated fields append); a batch is cut at
  // net::kAgentBatchBytes, so no batch passes what the agent accepts.
  void send(const v1::ControllerMessage& msg);
  // Writer side: waits up to `timeout_ms` for a batch. False when the link is closed.
  bool next(v1::ControllerMessage& out, int timeout_ms);
  void close();   // ends the stream (also cancels the call)
  void detach();  // the stream handler has returned: never cancel it again
  bool closed() const { return closed_; }

  void touch(double now) { last_seen_ = now; }
  double last_seen() const { return last_seen_; }

 private:
  std::string agent_id_;
  std::vector<std::string> nodes_;
  std::string incarnation_;
  std::string session_key_;
  Mutex mu_;
  std::function<void()> cancel_ CORRAL_GUARDED_BY(mu_);
  std::condition_variable cv_;
  std::deque<v1::ControllerMessage> batches_ CORRAL_GUARDED_BY(mu_);
  size_t last_bytes_ CORRAL_GUARDED_BY(mu_) = 0;  // of batches_.back()
  std::atomic<bool> closed_{false};
  std::atomic<double> last_seen_{0};
};

}  // namespace corral::ctld
