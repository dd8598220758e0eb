// The placement interface: given a request and the pool's free resources, choose nodes
// and the cores/GPUs on each. FlatPlacer is the one-dimensional best fit; the topology
// placers (placers/placers.h) keep per-switch / per-block aggregates current
// through node_added/node_changed so a decision on 100,000 nodes need not scan them all.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/idset.h"

namespace corral::topology {

class FreeCoreIndex;  // placers/free_core_index.h

// An allowed_nodes of {kNoNode} lets no node be used: the job waits (for a node that has
// what it needs to register).
inline constexpr uint32_t kNoNode = UINT32_MAX;

// What one job asks for, in the scheduler's terms.
struct Request {
  uint64_t jobid = 0;
  unsigned nnodes = 0;  // 0: any number of nodes
  unsigned ntasks = 1;
  unsigned cores_per_task = 1;
  unsigned gpus_per_task = 0;
  uint64_t mem_per_node_mb = 0;
  bool exclusive = false;
  std::vector<uint32_t> required_nodes;  // node indices that must all be used (-w)
  std::vector<uint32_t> allowed_nodes;   // empty: any; else only these (partition minus -x)
  // The producer guarantees allowed_nodes is ascending without repeats (the controller's
  // lists are): placers then skip checking a list as long as the machine.
  bool allowed_sorted = false;
  // --switches=COUNT: at most this many leaf switches (tree, dragonfly) or base blocks
  // (block) may be used; 0 = no limit. Flat and torus placers ignore it.
  unsigned max_leaves = 0;
  uint32_t placer = 0;  // which of the scheduler's placers (the partition's topology)
};

// One node's share of an allocation.
struct NodeShare {
  uint32_t node = 0;  // index in the pool
  unsigned ntasks = 0;
  IdSet cores;
  IdSet gpus;
  uint64_t memory_mb = 0;
};
struct Allocation {
  std::vector<NodeShare> shares;  // ascending node index
  bool exclusive = false;         // whole nodes: no other job may share them
  unsigned leaves = 0;            // leaf switches / base blocks used; 0 for flat and torus
};

// A read-only view of the pool the placer decides on.
struct NodeState {
  unsigned cores = 0, gpus = 0;
  uint64_t memory_mb = 0;
  IdSet free_cores, free_gpus;
  uint64_t free_memory_mb = 0;
  bool usable = false;          // up, not drained, not in housekeeping
  bool exclusive_held = false;  // an exclusive job holds it
  unsigned jobs = 0;            // jobs currently on the node
};

class Placer {
 public:
  virtual ~Placer() = default;
  virtual std::string name() const = 0;
  // The pool gained node `node` (indices are dense and given in order) named `name`.
  // A topology placer that does not know the name never places on that node.
  virtual void node_added(uint32_t node, const std::string& name, const NodeState& state) {
    (void)node, (void)name, (void)state;
  }
  // Called after every change of a node's state (allocation, release, usable), also while
  // the scheduler looks ahead in time (lend/unlend), so aggregates stay exact.
  virtual void node_changed(uint32_t node, const NodeState& state) { (void)node, (void)state; }
  // The fewest leaf switches / base blocks `req` could use on this topology if every node
  // were free (0 for flat and torus, or when the request can never fit).
  virtual unsigned fewest_leaves(const Request& req) const {
    (void)req;
    return 0;
  }
  // The best placement on `nodes` now, or nullopt if the request does not fit.
  virtual std::optional<Allocation> place(const Request& req, const std::vector<NodeState>& nodes) const = 0;
  // The same decision, helped by `index` (the usable nodes of `nodes` by free core count,
  // kept current by the pool's owner) so that small jobs are placed without scanning every
  // node. Placers that cannot use the index need not override this.
  virtual std::optional<Allocation> place_indexed(const Request& req, const std::vector<NodeState>& nodes,
                                                  const FreeCoreIndex& index) const {
    (void)index;
    return place(req, nodes);
  }
};

// Best fit: fewest nodes, preferring the nodes with the least free cores that still fit.
std::unique_ptr<Placer> make_flat_placer();

}  // namespace corral::topology
