#include "sched/scheduler.h"

#include "sched/feasibility.h"
#include "sched/job_queue.h"
#include "sched/resource_pool.h"
#include "sched/schedule_pass.h"

namespace corral::sched {

struct Scheduler::Impl {
  Placers placers;
  ResourcePool pool;
  JobQueue queue;
};

Scheduler::Scheduler(std::unique_ptr<topology::Placer> placer) : impl_(std::make_unique<Impl>()) {
  add_placer(placer ? std::move(placer) : topology::make_flat_placer());
}

uint32_t Scheduler::add_placer(std::unique_ptr<topology::Placer> placer) {
  impl_->pool.add_watcher(placer.get());
  impl_->placers.push_back(std::move(placer));
  return static_cast<uint32_t>(impl_->placers.size() - 1);
}

const topology::Placer& Scheduler::placer(uint32_t index) const {
  return *impl_->placers.at(index < impl_->placers.size() ? index : 0);
}

Scheduler::~Scheduler() = default;

uint32_t Scheduler::add_node(const NodeConfig& cfg) { return impl_->pool.add_node(cfg); }
size_t Scheduler::node_count() const { return impl_->pool.size(); }
const NodeConfig& Scheduler::node_config(uint32_t node) const { return impl_->pool.config(node); }

std::optional<uint32_t> Scheduler::node_index(const std::string& name) const { return impl_->pool.find(name); }

void Scheduler::set_usable(uint32_t node, bool usable) { impl_->pool.set_usable(node, usable); }

const topology::NodeState& Scheduler::node_state(uint32_t node) const { return impl_->pool.state(node); }

void Scheduler::enqueue(const PendingJob& job) { impl_->queue.push(job); }
void Scheduler::dequeue(uint64_t jobid) { impl_->queue.erase(jobid); }

void Scheduler::set_urgency(uint64_t jobid, unsigned urgency) { impl_->queue.set_urgency(jobid, urgency); }

size_t Scheduler::pending_count() const { return impl_->queue.size(); }

std::optional<std::string> Scheduler::unsatisfiable(const Request& req) const {
  if (auto why = check_satisfiable(impl_->pool, req)) return why;
  const topology::Placer& p = placer(req.placer);
  if (p.name() != "flat" && p.name() != "torus" && p.fewest_leaves(req) == 0)
    return "the request does not fit in any single part of the " + p.name() +
           " topology it is placed on (no switch or block holds that many nodes)";
  return std::nullopt;
}

void Scheduler::allocate(uint64_t jobid, const Allocation& alloc, double end_time) {
  impl_->queue.erase(jobid);  // a restored running job is no longer pending
  impl_->pool.allocate(jobid, alloc, end_time);
}

void Scheduler::release_node(uint64_t jobid, uint32_t node) { impl_->pool.release_node(jobid, node); }

void Scheduler::release(uint64_t jobid) { impl_->pool.release(jobid); }
bool Scheduler::is_allocated(uint64_t jobid) const { return impl_->pool.is_allocated(jobid); }

std::vector<Decision> Scheduler::schedule(double now) {
  return run_schedule_pass(impl_->placers, impl_->pool, impl_->queue, now);
}

std::string Scheduler::reason(uint64_t jobid) const {
  const QueuedJob* q = impl_->queue.find(jobid);
  return q ? std::string(to_string(q->reason)) : std::string();
}

}  // namespace corral::sched
