#include "ctld/agent_link.h"

#include <chrono>

#include <grpcpp/server_context.h>

namespace corral::ctld {

AgentLink::AgentLink(std::string agent_id, std::vector<std::string> nodes,
                     grpc::ServerContext* ctx)
    : agent_id_(std::move(agent_id)), nodes_(std::move(nodes)), ctx_(ctx) {}

void AgentLink::send(const v1::ControllerMessage& msg) {
  std::lock_guard lk(mu_);
  if (closed_) return;
  pending_.MergeFrom(msg);
  has_pending_ = true;
  cv_.notify_one();
}

bool AgentLink::next(v1::ControllerMessage& out, int timeout_ms) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
               [&] { return has_pending_ || closed_; });
  if (closed_) return false;
  if (has_pending_) {
    out.Swap(&pending_);
    pending_.Clear();
    has_pending_ = false;
  }
  return true;
}

void AgentLink::close() {
  std::lock_guard lk(mu_);
  closed_ = true;
  cv_.notify_all();
  if (ctx_) ctx_->TryCancel();
}

void AgentLink::detach() {
  std::lock_guard lk(mu_);
  closed_ = true;
  ctx_ = nullptr;
  cv_.notify_all();
}

}  // namespace corral::ctld
