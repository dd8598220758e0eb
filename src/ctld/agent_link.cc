#include "ctld/agent_link.h"

#include <chrono>

#include "net/message_limits.h"

namespace corral::ctld {

AgentLink::AgentLink(std::string agent_id, std::vector<std::string> nodes, std::function<void()> cancel,
                     std::string incarnation, std::string session_key)
    : agent_id_(std::move(agent_id)),
      nodes_(std::move(nodes)),
      incarnation_(std::move(incarnation)),
      session_key_(std::move(session_key)),
      cancel_(std::move(cancel)) {}

void AgentLink::send(const v1::ControllerMessage& msg) {
  const size_t bytes = msg.ByteSizeLong();
  MutexLock lk(mu_);
  if (closed_) return;
  if (batches_.empty() || last_bytes_ + bytes > net::kAgentBatchBytes) {
    batches_.emplace_back();
    last_bytes_ = 0;
  }
  batches_.back().MergeFrom(msg);
  last_bytes_ += bytes;
  cv_.notify_one();
}

bool AgentLink::next(v1::ControllerMessage& out, int timeout_ms) {
  MutexLock lk(mu_);
  cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms), [&] {
    mu_.assert_held();  // the wait calls it with the lock taken back
    return !batches_.empty() || closed_;
  });
  if (closed_) return false;
  if (!batches_.empty()) {
    out.Swap(&batches_.front());
    batches_.pop_front();
    if (batches_.empty()) last_bytes_ = 0;
  }
  return true;
}

void AgentLink::close() {
  MutexLock lk(mu_);
  closed_ = true;
  cv_.notify_all();
  if (cancel_) cancel_();
}

void AgentLink::detach() {
  MutexLock lk(mu_);
  closed_ = true;
  cancel_ = nullptr;
  cv_.notify_all();
}

}  // namespace corral::ctld
