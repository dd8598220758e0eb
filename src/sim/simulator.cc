#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>

#include "placers/placers.h"
#include "sched/scheduler.h"

namespace corral::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// The scheduler's id for trace job `i` (trace numbers need not be unique).
uint64_t sched_id(size_t i) { return i + 1; }
size_t trace_index(uint64_t id) { return id - 1; }

topology::Request request_of(const SwfJob& job, uint64_t id) {
  topology::Request r;
  r.jobid = id;
  r.ntasks = job.procs;  // one processor of the trace is one core
  r.cores_per_task = 1;
  return r;
}

class Simulation {
 public:
  Simulation(const Cluster& cluster, const SwfTrace& trace) : trace_(trace), sched_(make_placer(cluster)) {
    for (const auto& name : cluster.nodes) sched_.add_node({name, cluster.cores_per_node, cluster.gpus_per_node, 0});
    result_.nodes = cluster.nodes.size();
    result_.total_cores = uint64_t(cluster.nodes.size()) * cluster.cores_per_node;
    result_.placer = sched_.placer(0).name();
    outcome_.resize(trace.jobs.size());
    started_.assign(trace.jobs.size(), false);
    cores_.assign(trace.jobs.size(), 0);
    free_cores_ = result_.total_cores;
  }

  SimResult run() {
    auto t0 = std::chrono::steady_clock::now();
    auto arrivals = arrival_order();
    size_t next = 0;
    while (next < arrivals.size() || !ends_.empty()) {
      double t = std::min(next < arrivals.size() ? trace_.jobs[arrivals[next]].submit : kNever,
                          ends_.empty() ? kNever : ends_.top().first);
      for (; !ends_.empty() && ends_.top().first <= t; ends_.pop()) finish(ends_.top().second);
      for (; next < arrivals.size() && trace_.jobs[arrivals[next]].submit <= t; ++next) arrive(arrivals[next], next);
      if (!may_start_any()) {
        ++result_.passes_skipped;
        continue;
      }
      for (auto& d : sched_.schedule(t)) start(d, t);
      ++result_.passes;
    }
    collect();
    result_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::move(result_);
  }

 private:
  static std::unique_ptr<topology::Placer> make_placer(const Cluster& cluster) {
    return cluster.topology ? topology::make_placer(*cluster.topology) : topology::make_flat_placer();
  }

  // Trace positions by submit time; ties keep file order.
  std::vector<size_t> arrival_order() const {
    std::vector<size_t> order(trace_.jobs.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return trace_.jobs[a].submit < trace_.jobs[b].submit; });
    return order;
  }

  // A pass with every pending job larger than the free cores starts nothing (the scheduler
  // refuses such jobs before any placement or reservation), so it need not run.
  bool may_start_any() const { return !pending_procs_.empty() && *pending_procs_.begin() <= free_cores_; }

  void arrive(size_t i, size_t rank) {
    const SwfJob& job = trace_.jobs[i];
    auto req = request_of(job, sched_id(i));
    const Shape& shape = shape_of(req);
    if (shape.unsatisfiable) {
      result_.too_big.push_back({job.id, job.line, *shape.unsatisfiable});
      return;
    }
    JobOutcome& o = outcome_[i];
    o.id = job.id;
    o.submit = job.submit;
    o.run = job.run;
    o.requested = job.requested;
    o.procs = job.procs;
    o.fewest = shape.fewest;
    // Priority is submit order: every trace job has the same urgency.
    sched_.enqueue({req, 16, rank, job.requested});
    enqueued_.push_back(i);
    pending_procs_.insert(job.procs);
  }

  // What the cluster says about a job size, asked once per size: both answers cost a walk
  // over the nodes or the topology.
  struct Shape {
    std::optional<std::string> unsatisfiable;
    unsigned fewest = 0;
  };
  const Shape& shape_of(const topology::Request& req) {
    auto [it, fresh] = shapes_.try_emplace(req.ntasks);
    if (fresh) {
      it->second.unsatisfiable = sched_.unsatisfiable(req);
      if (!it->second.unsatisfiable) it->second.fewest = sched_.placer(0).fewest_leaves(req);
    }
    return it->second;
  }

  void start(const sched::Decision& d, double now) {
    size_t i = trace_index(d.jobid);
    JobOutcome& o = outcome_[i];
    o.start = now;
    o.end = now + o.run;
    o.nodes = static_cast<unsigned>(d.alloc.shares.size());
    o.leaves = d.alloc.leaves;
    started_[i] = true;
    ends_.push({o.end, d.jobid});
    pending_procs_.erase(pending_procs_.find(o.procs));
    cores_[i] = 0;
    for (const auto& share : d.alloc.shares) cores_[i] += share.cores.count();
    free_cores_ -= cores_[i];
  }

  void finish(uint64_t id) {
    sched_.release(id);
    free_cores_ += cores_[trace_index(id)];
  }

  void collect() {
    for (size_t i : enqueued_) {
      if (started_[i]) continue;
      result_.never_started.push_back(trace_.jobs[i].id);
    }
    std::sort(enqueued_.begin(), enqueued_.end());
    for (size_t i : enqueued_)
      if (started_[i]) result_.jobs.push_back(outcome_[i]);
  }

  using End = std::pair<double, uint64_t>;  // (end time, scheduler job id)

  const SwfTrace& trace_;
  sched::Scheduler sched_;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends_;
  std::vector<JobOutcome> outcome_;  // by trace position
  std::vector<bool> started_;
  std::vector<uint64_t> cores_;  // by trace position: cores held while running
  uint64_t free_cores_ = 0;      // on all nodes (an upper bound of what can be placed)
  std::multiset<unsigned> pending_procs_;
  std::vector<size_t> enqueued_;                // trace positions that were enqueued
  std::unordered_map<unsigned, Shape> shapes_;  // by processor count
  SimResult result_;
};

}  // namespace

SimResult simulate(const Cluster& cluster, const SwfTrace& trace) { return Simulation(cluster, trace).run(); }

}  // namespace corral::sim
