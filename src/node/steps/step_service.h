// The agent's StepService gRPC server side: RunStep (a callback reactor per call, no
// thread of its own: client messages are posted to the event loop, the step manager's
// answers are queued and written by gRPC), ListSteps, LaunchTasks (StepNode's pump) and
// JobFence. Callers are identified by SO_PEERCRED when the service listens on a Unix
// socket through a PeerListener; without one (host:port) RunStep and ListSteps refuse.
#pragma once

#include <memory>

namespace grpc {
class Service;
}

namespace corral::net {
class Credentials;
class PeerListener;
}  // namespace corral::net

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

class StepManager;
class StepNode;
class JobFenceTable;

class StepService {
 public:
  // Everything must outlive the service; the step manager and the node are only touched
  // on the loop thread. `peers` may be null (TCP): callers there are known by the
  // credential of each request, checked with `creds` (null: no caller over TCP is known).
  StepService(EventLoop& loop, StepManager& steps, StepNode& node, JobFenceTable& fences,
              const net::PeerListener* peers, std::shared_ptr<net::Credentials> creds = nullptr);
  ~StepService();
  StepService(const StepService&) = delete;
  StepService& operator=(const StepService&) = delete;

  grpc::Service* service();  // for grpc::ServerBuilder::RegisterService
  // RunStep calls opened from now on take their client for gone past this much unread
  // output (default kMaxUnreadOutput; tests make it small).
  void set_max_unread_output(size_t bytes);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
