// The scheduler: a resource pool of nodes (cores, GPUs, memory) and a priority queue with
// EASY backfill. Pure bookkeeping, no I/O: the controller feeds it events and acts on the
// decisions it returns, so it also runs in simulations and unit tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "placers/placement.h"

namespace corral::sched {

using topology::Allocation;
using topology::Request;

struct NodeConfig {
  std::string name;
  unsigned cores = 1;
  unsigned gpus = 0;
  uint64_t memory_mb = 0;
};

struct PendingJob {
  Request req;
  unsigned urgency = 16;      // 0-31; higher first
  uint64_t submit_order = 0;  // usually the job id; lower first
  double duration = 0;        // time limit in seconds; 0 = unknown (runs "forever")
  // --switches=COUNT@TIME: req.max_leaves applies until this time (absolute seconds), then
  // the job takes any placement. 0 with max_leaves set: the limit applies forever.
  double switches_until = 0;
};

struct Decision {
  uint64_t jobid = 0;
  Allocation alloc;
};

class Scheduler {
 public:
  explicit Scheduler(std::unique_ptr<topology::Placer> placer);  // null: the flat placer
  // Another placer (a partition's topology); Request::placer selects it by the returned
  // index. The first placer, given to the constructor, is index 0.
  uint32_t add_placer(std::unique_ptr<topology::Placer> placer);
  const topology::Placer& placer(uint32_t index) const;
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Nodes. Indices are stable and given in the order added. A new node is usable.
  uint32_t add_node(const NodeConfig& cfg);
  size_t node_count() const;
  const NodeConfig& node_config(uint32_t node) const;
  std::optional<uint32_t> node_index(const std::string& name) const;
  // Down, drained and housekeeping nodes are not usable for new work.
  void set_usable(uint32_t node, bool usable);
  const topology::NodeState& node_state(uint32_t node) const;

  // Queue.
  void enqueue(const PendingJob& job);
  void dequeue(uint64_t jobid);  // cancelled or held; no-op if unknown
  void set_urgency(uint64_t jobid, unsigned urgency);
  size_t pending_count() const;
  // Whether `req` could ever run on the configured nodes (ignoring current use);
  // the error message says what cannot be satisfied.
  std::optional<std::string> unsatisfiable(const Request& req) const;

  // Running allocations. `end_time` is start + time limit, or 0 when unknown.
  // `allocate` marks the resources used (also used to restore running jobs on restart; set
  // alloc.exclusive for a job that asked for whole nodes). It removes the job from the queue.
  void allocate(uint64_t jobid, const Allocation& alloc, double end_time);
  // Returns a node's resources of a job to the pool (housekeeping done there).
  void release_node(uint64_t jobid, uint32_t node);
  void release(uint64_t jobid);  // all of them
  bool is_allocated(uint64_t jobid) const;

  // One scheduling pass at time `now`: starts as many pending jobs as priority order and
  // EASY backfill allow. Started jobs are removed from the queue and allocated.
  std::vector<Decision> schedule(double now);

  // Why a pending job waits: "Priority", "Resources", "ReqNodeNotAvail", "Switches", ...
  // ("" if unknown).
  std::string reason(uint64_t jobid) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::sched
