#include "sched/job_queue.h"

#include <algorithm>
#include <tuple>

namespace corral::sched {

std::string_view to_string(WaitReason reason) {
  switch (reason) {
    case WaitReason::None:
      return "";
    case WaitReason::Priority:
      return "Priority";
    case WaitReason::Resources:
      return "Resources";
    case WaitReason::ReqNodeNotAvail:
      return "ReqNodeNotAvail";
    case WaitReason::JobHeldUser:
      return "JobHeldUser";
    case WaitReason::Switches:
      return "Switches";
  }
  return "";
}

bool JobQueue::Key::operator<(const Key& o) const {
  // Higher urgency sorts first, hence the swapped operands.
  return std::tie(o.urgency, submit_order, jobid) < std::tie(urgency, o.submit_order, o.jobid);
}

void JobQueue::push(const PendingJob& job) {
  erase(job.req.jobid);
  Key key{std::min(job.urgency, kUrgencyExpedite), job.submit_order, job.req.jobid};
  auto [it, fresh] = jobs_.emplace(key, QueuedJob{job, WaitReason::None});
  (void)fresh;
  keys_.emplace(job.req.jobid, it);
}

void JobQueue::erase(uint64_t jobid) {
  auto it = keys_.find(jobid);
  if (it == keys_.end()) return;
  jobs_.erase(it->second);
  keys_.erase(it);
}

JobQueue::Map::iterator JobQueue::erase(Map::iterator it) {
  keys_.erase(it->first.jobid);
  return jobs_.erase(it);
}

void JobQueue::set_urgency(uint64_t jobid, unsigned urgency) {
  auto it = keys_.find(jobid);
  if (it == keys_.end()) return;
  auto node = jobs_.extract(it->second);
  node.key().urgency = std::min(urgency, kUrgencyExpedite);
  node.mapped().job.urgency = node.key().urgency;
  it->second = jobs_.insert(std::move(node)).position;
}

const QueuedJob* JobQueue::find(uint64_t jobid) const {
  auto it = keys_.find(jobid);
  if (it == keys_.end()) return nullptr;
  return &it->second->second;
}

}  // namespace corral::sched
