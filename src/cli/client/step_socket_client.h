// RunStep over the agent's Unix socket without gRPC (net/step_frames.h): the transport of
// StepStream for step managers on this host. No gRPC channel, threads or HTTP/2 for a
// short step: a connect, one write and the reads of the answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/client/step_client.h"
#include "util/unique_fd.h"

namespace corral::cli {

// The kMessage frame of StepClientMessage{create: spec}, written from `spec` itself: the
// bytes a copy into the message would serialize to, without the copy of its environment.
std::string step_create_frame(const pb::StepSpec& spec);

// Connections to one step manager's socket that a call has ended on, kept for the next
// call (net/step_frames.h: an agent reads one call after another on a connection), so a
// program that runs many steps connects once per caller thread, not once per step.
class StepSocketPool {
 public:
  // `keep` false: every call connects anew (CORRAL_STEP_REUSE=0, for measurements).
  explicit StepSocketPool(std::string path, bool keep = true) : path_(std::move(path)), keep_(keep) {}
  struct Taken {
    UniqueFd fd;
    bool reused = false;  // an idle one: the agent may close it at the moment it is taken
  };
  // An idle connection the agent has not closed, else a new one with the preface sent.
  Result<Taken> take();
  // A new connection with the preface sent.
  Result<UniqueFd> connect();
  // A connection whose call ended with nothing left unread; kept up to kMaxIdle.
  void give_back(UniqueFd fd);
  const std::string& path() const { return path_; }
  static constexpr size_t kMaxIdle = 64;

 private:
  std::string path_;
  bool keep_;
  std::mutex mu_;
  std::vector<UniqueFd> idle_;  // under mu_
};

// A call over a connection of `pool`, which gets it back when the call ends cleanly.
// `max_frame`: the largest frame accepted.
Result<std::unique_ptr<StepStream::Impl>> open_step_socket(const std::shared_ptr<StepSocketPool>& pool,
                                                           uint64_t jobid, size_t max_frame);

}  // namespace corral::cli
