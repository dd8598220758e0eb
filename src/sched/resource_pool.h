// The nodes the scheduler places on and what running jobs hold of them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "placers/free_core_index.h"
#include "sched/scheduler.h"

namespace corral::sched {

class ResourcePool {
 public:
  struct Running {
    std::vector<topology::NodeShare> shares;  // what the job holds now, ascending node
    double end_time = 0;                      // 0: unknown
    bool exclusive = false;
    std::multimap<double, uint64_t>::iterator end_entry;  // in by_end_time() if end_time > 0
  };

  // New nodes are usable; the owner marks them otherwise.
  uint32_t add_node(const NodeConfig& cfg);
  size_t size() const { return configs_.size(); }
  const NodeConfig& config(uint32_t node) const { return configs_.at(node); }
  const topology::NodeState& state(uint32_t node) const { return states_.at(node); }
  const std::vector<topology::NodeState>& states() const { return states_; }
  const topology::FreeCoreIndex& index() const { return index_; }
  std::optional<uint32_t> find(const std::string& name) const;
  void set_usable(uint32_t node, bool usable);
  // `placer` hears of every node (node_added now for those already present) and of every
  // change to one (node_changed), so it can keep its own aggregates. Not owned.
  void add_watcher(topology::Placer* placer);

  // Takes what the allocation names and is still free (a restored allocation that overlaps
  // another is clipped, so releasing it never frees someone else's cores).
  void allocate(uint64_t jobid, const topology::Allocation& alloc, double end_time);
  void release_node(uint64_t jobid, uint32_t node);
  void release(uint64_t jobid);
  bool is_allocated(uint64_t jobid) const { return running_.contains(jobid); }
  const Running& running(uint64_t jobid) const { return running_.at(jobid); }
  // Running jobs with a known end time, soonest first.
  const std::multimap<double, uint64_t>& by_end_time() const { return ends_; }

  // Looking ahead in time: lend() returns a running job's resources to the pool as if it had
  // ended, unlend() takes them back. Undo every lend, in reverse order, before any other change.
  void lend(const Running& job);
  void unlend(const Running& job);

 private:
  topology::NodeShare take(const topology::NodeShare& want, bool exclusive);
  void changed(uint32_t node);
  void give(const topology::NodeShare& share, bool exclusive);

  std::vector<NodeConfig> configs_;
  std::vector<topology::NodeState> states_;
  std::unordered_map<std::string, uint32_t> by_name_;
  topology::FreeCoreIndex index_;
  std::vector<topology::Placer*> watchers_;
  std::unordered_map<uint64_t, Running> running_;
  std::multimap<double, uint64_t> ends_;
};

}  // namespace corral::sched
