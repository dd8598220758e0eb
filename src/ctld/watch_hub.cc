#include "ctld/watch_hub.h"

#include <chrono>

namespace corral::ctld {

v1::JobEvent to_proto(uint64_t jobid, const job::Event& ev) {
  v1::JobEvent e;
  e.set_jobid(jobid);
  e.set_timestamp(ev.timestamp);
  e.set_name(ev.name);
  e.set_context(ev.context);
  return e;
}

Subscriber::Subscriber(WatchFilter f) : filter_(std::move(f)) {
  if (filter_.until_inactive) remaining_ = filter_.jobids;
}

void Subscriber::queue_locked(v1::WatchItem item) {
  if (queue_.size() >= filter_.max_queued) {
    queue_.clear();
    overflowed_ = done_ = true;
  } else {
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
}

void Subscriber::offer_event(const v1::JobEvent& ev, uint32_t owner) {
  if (!filter_.viewer.sees_job(owner)) return;
  MutexLock lk(mu_);
  if (done_) return;
  if (!filter_.jobids.empty() && !filter_.jobids.count(ev.jobid())) return;
  if (filter_.names.empty() || filter_.names.count(ev.name())) {
    v1::WatchItem item;
    *item.mutable_event() = ev;
    if (!filter_.viewer.sees_details(owner)) redact(*item.mutable_event());
    queue_locked(std::move(item));
  }
  if (ev.name() == "clean") finish_job_locked(ev.jobid());
}

void Subscriber::offer_output(const v1::TaskOutput& out, uint32_t owner) {
  if (!filter_.output || !filter_.viewer.sees_details(owner)) return;
  MutexLock lk(mu_);
  if (done_) return;
  if (!filter_.jobids.empty() && !filter_.jobids.count(out.jobid())) return;
  v1::WatchItem item;
  *item.mutable_output() = out;
  queue_locked(std::move(item));
}

bool Subscriber::overflowed() {
  MutexLock lk(mu_);
  return overflowed_;
}

void Subscriber::mark_inactive(uint64_t jobid) {
  MutexLock lk(mu_);
  finish_job_locked(jobid);
}

void Subscriber::finish_job_locked(uint64_t jobid) {
  if (!filter_.until_inactive) return;
  remaining_.erase(jobid);
  if (remaining_.empty()) {
    done_ = true;
    cv_.notify_one();
  }
}

void Subscriber::close() {
  MutexLock lk(mu_);
  done_ = true;
  cv_.notify_one();
}

bool Subscriber::next(v1::WatchReply& reply, int timeout_ms) {
  MutexLock lk(mu_);
  cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms), [&] {
    mu_.assert_held();  // the wait calls it with the lock taken back
    return !queue_.empty() || done_;
  });
  constexpr size_t kMaxBatch = 4096;
  while (!queue_.empty() && static_cast<size_t>(reply.items_size()) < kMaxBatch) {
    *reply.add_items() = std::move(queue_.front());
    queue_.pop_front();
  }
  return !(done_ && queue_.empty() && reply.items_size() == 0);
}

void WatchHub::add(std::shared_ptr<Subscriber> s) {
  MutexLock lk(mu_);
  subs_.push_back(std::move(s));
}

bool WatchHub::idle() {
  MutexLock lk(mu_);
  std::erase_if(subs_, [](const std::weak_ptr<Subscriber>& s) { return s.expired(); });
  return subs_.empty();
}

void WatchHub::publish_event(const v1::JobEvent& ev, uint32_t owner) {
  MutexLock lk(mu_);
  for (size_t i = 0; i < subs_.size();) {
    if (auto s = subs_[i].lock()) {
      s->offer_event(ev, owner);
      ++i;
    } else {
      subs_[i] = std::move(subs_.back());
      subs_.pop_back();
    }
  }
}

void WatchHub::publish_output(const v1::TaskOutput& out, uint32_t owner) {
  MutexLock lk(mu_);
  for (auto& w : subs_)
    if (auto s = w.lock()) s->offer_output(out, owner);
}

void WatchHub::close_all() {
  MutexLock lk(mu_);
  for (auto& w : subs_)
    if (auto s = w.lock()) s->close();
  subs_.clear();
}

}  // namespace corral::ctld
