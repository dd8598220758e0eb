// Step allocation inside one job: which of the job's nodes, cores and GPUs each step
// gets, as the job's step manager decides it. Pure bookkeeping, no I/O.
//
// Policy:
//  - Nodes are considered in job order; tasks are laid out by block (a node is filled
//    before the next one is used).
//  - Without -N a step uses as few nodes as it can; with -N it uses exactly N nodes and
//    spreads its tasks evenly (the first nodes take one extra task when it does not divide).
//  - Nodes named with -w must be used and get at least one task.
//  - Steps own their cores and GPUs exclusively. An --overlap step may also use cores and
//    GPUs other steps hold (it prefers free ones), but never more than a node has; the
//    cores it takes are not counted as busy for anyone else.
//  - A request that cannot fit even in the empty job is invalid_argument (the message says
//    what the job has); one that only has to wait for running steps is unavailable.
//  - The wait queue is strict FIFO: ready() never lets a step overtake an earlier waiting
//    one, even a smaller step that would fit now. The step manager knows no step run times,
//    so it cannot backfill without risking that a stream of small steps starves a big one
//    forever; users also expect steps started in script order to run in that order.
//    For the same reason allocate() refuses (unavailable) a non-overlap step while others
//    wait. Overlap steps take nothing exclusively, so they never wait on the queue.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/idset.h"
#include "util/result.h"

namespace corral::node {

using StepId = uint32_t;

// One node of the job's allocation.
struct JobNode {
  std::string name;
  IdSet cores;
  IdSet gpus;
};

struct StepRequest {
  uint32_t nnodes = 0;  // -N; 0 = as few as fit
  uint32_t ntasks = 1;  // -n
  uint32_t cores_per_task = 1;
  uint32_t gpus_per_task = 0;
  std::string nodelist;  // -w, hostlist text; empty = any
  bool overlap = false;
};

struct NodeShare {
  std::string name;
  uint32_t ntasks = 0;
  IdSet cores;
  IdSet gpus;
  bool operator==(const NodeShare&) const = default;
};

struct StepShare {
  std::vector<NodeShare> nodes;  // in job order, only nodes with tasks
  uint32_t ntasks() const;
};

struct ReadyStep {
  StepId id = 0;
  StepShare share;
};

class StepAllocator {
 public:
  // nodes in job order; the error names an empty job, a nameless node, a duplicate name
  // or a node without cores.
  static Result<StepAllocator> create(uint64_t job_id, std::vector<JobNode> nodes);

  // Places the step now and records it as running under `id`.
  // invalid_argument: the step can never fit this job (or is malformed);
  // unavailable: it must wait for running steps (or queued ones) to end;
  // already_exists: `id` is running or queued.
  Result<StepShare> allocate(StepId id, const StepRequest& req);

  // Frees a running step's cores and GPUs, or drops it from the wait queue.
  // Unknown ids are ignored: a step may end before its allocation is known.
  void release(StepId id);

  // Queues a step that got `unavailable`; the request is checked like in allocate()
  // (invalid_argument if it could never fit, already_exists for a known id).
  Status enqueue(StepId id, StepRequest req);

  // Allocates queued steps from the front, in order, while they fit; stops at the first
  // that does not (strict FIFO, see above). The returned steps are running.
  std::vector<ReadyStep> ready();

  size_t queued() const { return queue_.size(); }
  size_t running() const { return running_.size(); }
  const std::vector<JobNode>& nodes() const { return nodes_; }

 private:
  struct Usage {  // per node, exclusive use only
    IdSet cores;
    IdSet gpus;
  };
  struct Running {
    StepShare share;
    bool overlap = false;
  };
  struct Waiting {
    StepId id = 0;
    StepRequest req;
  };

  StepAllocator(uint64_t job_id, std::vector<JobNode> nodes);
  // Error if the step can never fit (checks against an idle job).
  Result<std::vector<bool>> validate(const StepRequest& req) const;
  Result<std::vector<bool>> required_nodes(const std::string& nodelist) const;
  Result<StepShare> place(const StepRequest& req, const std::vector<bool>& required,
                          const std::vector<Usage>& busy) const;
  // Tasks per node for the request, or nothing if it does not fit; `busy` null: every
  // node idle.
  std::optional<std::vector<uint32_t>> lay_out(const StepRequest& req, const std::vector<bool>& required,
                                               const std::vector<Usage>* busy) const;
  Result<StepShare> try_place(StepId id, const StepRequest& req);
  void commit(StepId id, const StepShare& share, bool overlap);
  bool known(StepId id) const;
  std::string describe_job() const;
  std::string node_names() const;                                                   // the job's nodes as a hostlist
  uint32_t capacity(size_t node, const StepRequest& req, const Usage* busy) const;  // busy null: idle

  uint64_t job_id_ = 0;
  std::vector<JobNode> nodes_;
  std::map<std::string, size_t> index_;  // node name -> position in nodes_
  std::vector<Usage> busy_;              // parallel to nodes_
  std::map<StepId, Running> running_;
  std::deque<Waiting> queue_;
};

}  // namespace corral::node
