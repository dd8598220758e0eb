// One LaunchTasks stream from a parent agent to a child agent of a step's launch tree:
// a thread writes the queued LaunchDown messages (the launch request first), another
// reads the child's LaunchUp messages and posts each to the event loop. When the stream
// ends, `closed` is posted with "" (the child finished) or what went wrong.
//
// Protocol: the parent half-closes (close_writes) once every rank of the child's subtree
// has its TaskExit; the child's server then returns. Posted callbacks are dropped once
// the link is destroyed, so its owner may destroy it from inside them.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "steps.pb.h"

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

class StepChildLink {
 public:
  using OnUp = std::function<void(v1::LaunchUp&&)>;
  using OnClosed = std::function<void(const std::string& error)>;

  // Starts at once: connects to `uri` (unix:/path or host:port; TLS trusting `tls_ca`
  // when set) and sends `launch`.
  StepChildLink(EventLoop& loop, std::string uri, const std::string& tls_ca, v1::LaunchTasksRequest launch, OnUp up,
                OnClosed closed);
  // Cancels the stream if it is still open and waits for both threads.
  ~StepChildLink();
  StepChildLink(const StepChildLink&) = delete;
  StepChildLink& operator=(const StepChildLink&) = delete;

  // Thread-safe; dropped once the stream ended or writes were closed.
  void send(v1::LaunchDown msg);
  void close_writes();
  // The parent gives up: the child sees its stream cancelled and kills its subtree.
  void cancel();
  const std::string& uri() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
