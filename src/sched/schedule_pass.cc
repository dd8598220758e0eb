#include "sched/schedule_pass.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "sched/reservation.h"

namespace corral::sched {
namespace {

using topology::Allocation;
using topology::Request;

// Requests that differ only in job id place identically, so one failed placement answers for
// every job of the same shape for the rest of the pass (the pool only shrinks during it).
struct Shape {
  unsigned nnodes, ntasks, cores_per_task, gpus_per_task, max_leaves, placer;
  uint64_t mem_per_node_mb;
  bool exclusive;
  bool operator==(const Shape&) const = default;
};
struct ShapeHash {
  size_t operator()(const Shape& s) const {
    size_t h = std::hash<uint64_t>{}(s.mem_per_node_mb);
    for (unsigned v : {s.nnodes, s.ntasks, s.cores_per_task, s.gpus_per_task, s.max_leaves, s.placer,
                       static_cast<unsigned>(s.exclusive)}) {
      h = h * 1000003u ^ std::hash<unsigned>{}(v);
    }
    return h;
  }
};
using ShapeSet = std::unordered_set<Shape, ShapeHash>;

// Only requests without node lists have a shape that says everything about them.
std::optional<Shape> shape_of(const Request& r) {
  if (!r.required_nodes.empty() || !r.allowed_nodes.empty()) return std::nullopt;
  return Shape{r.nnodes,     r.ntasks, r.cores_per_task,  r.gpus_per_task,
               r.max_leaves, r.placer, r.mem_per_node_mb, r.exclusive};
}

// Makes nodes unusable for the placements made while it lives.
class HiddenNodes {
 public:
  HiddenNodes(ResourcePool& pool, const std::vector<uint32_t>& nodes) : pool_(pool) {
    for (uint32_t n : nodes) {
      // A node without a free core takes nothing anyway (the pool only fills during a pass).
      if (!pool_.state(n).usable || pool_.state(n).free_cores.count() == 0) continue;
      pool_.set_usable(n, false);
      hidden_.push_back(n);
    }
  }
  ~HiddenNodes() {
    for (uint32_t n : hidden_) pool_.set_usable(n, true);
  }
  HiddenNodes(const HiddenNodes&) = delete;
  HiddenNodes& operator=(const HiddenNodes&) = delete;

 private:
  ResourcePool& pool_;
  std::vector<uint32_t> hidden_;
};

class Pass {
 public:
  Pass(const Placers& placers, ResourcePool& pool, double now) : placers_(placers), pool_(pool), now_(now) {}

  // Decides one job: its allocation if it starts now, else sets why it waits.
  std::optional<Allocation> decide(QueuedJob& q) {
    const Request& r = effective_request(q);
    if (q.job.urgency == kUrgencyHold) return wait(q, WaitReason::JobHeldUser);
    if (required_node_unavailable(r)) return wait(q, WaitReason::ReqNodeNotAvail);
    // Behind the reservation, a job that would still run when it starts may only use other
    // nodes: place it with the reserved ones hidden (they stay hidden for the following such
    // jobs, instead of being hidden and shown again for each).
    if (resv_ && !ends_before_reservation(q.job)) return place_outside(q, r);
    hidden_.reset();
    auto fit = try_place(r, no_fit_now_);
    if (!fit) {
      if (!resv_) blocked_.push_back(&r);
      return wait(q, waits_for_switches(r) ? WaitReason::Switches : WaitReason::Resources);
    }
    if (!resv_) resolve_reservation();
    if (!resv_ || may_backfill(q.job, *fit)) return fit;
    return place_outside(q, r);
  }

 private:
  bool ends_before_reservation(const PendingJob& job) const {
    return job.duration > 0 && now_ + job.duration <= resv_->start;
  }

  std::optional<Allocation> place_outside(QueuedJob& q, const Request& r) {
    if (!hidden_) hidden_.emplace(pool_, resv_->nodes);
    if (auto outside = try_place(r, no_fit_outside_)) return outside;
    return wait(q, WaitReason::Priority);
  }

  // The request as it stands now: a --switches limit whose wait has run out no longer applies.
  const Request& effective_request(QueuedJob& q) {
    const PendingJob& j = q.job;
    if (j.req.max_leaves == 0 || j.switches_until <= 0 || now_ < j.switches_until) return j.req;
    q.job.req.max_leaves = 0;
    return q.job.req;
  }

  // Whether only the --switches limit keeps `r` from starting now.
  bool waits_for_switches(const Request& r) {
    if (r.max_leaves == 0) return false;
    Request any = r;
    any.max_leaves = 0;
    return placer_for(any).place_indexed(any, pool_.states(), pool_.index()).has_value();
  }

  const topology::Placer& placer_for(const Request& r) const {
    return *placers_[r.placer < placers_.size() ? r.placer : 0];
  }

  static std::optional<Allocation> wait(QueuedJob& q, WaitReason why) {
    q.reason = why;
    return std::nullopt;
  }

  bool required_node_unavailable(const Request& r) const {
    return std::any_of(r.required_nodes.begin(), r.required_nodes.end(),
                       [&](uint32_t n) { return n >= pool_.size() || !pool_.state(n).usable; });
  }

  // Cheap refusals first: once the machine is full, a long queue costs a few compares a job.
  bool could_fit(const Request& r) const {
    uint64_t per_task = std::max(1u, r.cores_per_task);
    const auto& index = pool_.index();
    return per_task * r.ntasks <= index.total_free() && per_task <= index.max_free();
  }

  std::optional<Allocation> try_place(const Request& r, ShapeSet& failed) {
    if (!could_fit(r)) return std::nullopt;
    auto shape = shape_of(r);
    if (shape && failed.contains(*shape)) return std::nullopt;
    auto alloc = placer_for(r).place_indexed(r, pool_.states(), pool_.index());
    if (!alloc && shape) failed.insert(*shape);
    return alloc;
  }

  // The reservation goes to the first blocked job that can ever start; it is computed only
  // once a later job could start, since until then nothing needs protecting from it.
  void resolve_reservation() {
    for (const Request* r : blocked_) {
      auto shape = shape_of(*r);
      if (shape && never_fits_.contains(*shape)) continue;
      resv_ = find_reservation(placer_for(*r), pool_, *r, now_);
      if (resv_) break;
      if (shape) never_fits_.insert(*shape);
    }
    blocked_.clear();
  }

  // A job may use the reserved nodes if it is gone before the reservation starts.
  bool may_backfill(const PendingJob& job, const Allocation& alloc) const {
    if (ends_before_reservation(job)) return true;
    return std::none_of(alloc.shares.begin(), alloc.shares.end(), [&](const auto& share) {
      return std::binary_search(resv_->nodes.begin(), resv_->nodes.end(), share.node);
    });
  }

  const Placers& placers_;
  ResourcePool& pool_;
  double now_;
  ShapeSet no_fit_now_, no_fit_outside_, never_fits_;
  std::vector<const Request*> blocked_;  // waiting for the reservation to be resolved
  std::optional<Reservation> resv_;
  std::optional<HiddenNodes> hidden_;  // declared last: shown again before the rest goes
};

}  // namespace

std::vector<Decision> run_schedule_pass(const Placers& placers, ResourcePool& pool, JobQueue& queue, double now) {
  Pass pass(placers, pool, now);
  std::vector<Decision> started;
  for (auto it = queue.begin(); it != queue.end();) {
    QueuedJob& q = it->second;
    auto alloc = pass.decide(q);
    if (!alloc) {
      ++it;
      continue;
    }
    double end_time = q.job.duration > 0 ? now + q.job.duration : 0;
    pool.allocate(it->first.jobid, *alloc, end_time);
    started.push_back({it->first.jobid, std::move(*alloc)});
    it = queue.erase(it);
  }
  return started;
}

}  // namespace corral::sched
