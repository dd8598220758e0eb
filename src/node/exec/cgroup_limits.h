// The limits a job gets on a node (memory from --mem, a process count, its CPUs) and
// the cgroup hierarchies that enforce them. cgroup v2 carries every controller it
// delegates to us; a controller v2 does not have here but a cgroup v1 hierarchy does
// (hybrid machines, RHEL 8 and other v1-only systems) is used there instead, as Slurm's
// cgroup/v1 plugin does. TaskCgroups makes every unit in each of these hierarchies and
// moves each task into all of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace corral::node {

struct JobLimits {
  uint64_t memory_bytes = 0;  // 0: none (the job asked for no memory)
  uint64_t pids = 0;          // 0: none
  std::vector<int> cpus;      // sorted; empty: no cpuset (virtual nodes, no CPU map)
  bool any() const { return memory_bytes != 0 || pids != 0 || !cpus.empty(); }
};

// One hierarchy corral puts its units in: `root` is this agent's ROOT there.
struct CgroupTree {
  std::string root;
  bool v2 = false;
  std::vector<std::string> controllers;  // of "memory", "pids", "cpuset": the limits it enforces
  bool has(const std::string& controller) const;
};

// The limit controllers corral uses, in the order it reports them.
const std::vector<std::string>& limit_controllers();

// Turns on, for the children of a v2 ROOT, the limit controllers that ROOT's parent
// delegates (and, where the parent allows it, the ones it does not yet). Returns those now
// enabled; `missing` says for the others why not.
std::vector<std::string> enable_v2_controllers(const std::string& base, const std::string& root, std::string* missing);

// The v1 hierarchies of the limit controllers not in `have`: for each, the directory of
// this process's own cgroup there (where ROOT's parent goes).
struct V1Base {
  std::string controller, dir;
};
std::vector<V1Base> v1_bases(const std::vector<std::string>& have);

// Prepares a directory just made in `tree` (a v1 cpuset starts with no CPUs and no memory
// nodes and would refuse every task: it gets its parent's).
Status init_cgroup_dir(const CgroupTree& tree, const std::string& dir);

// Whether `tree` enforces any of `limits`.
bool enforces(const CgroupTree& tree, const JobLimits& limits);
// Writes the limits `tree` enforces into `dir`. Swap is limited to nothing beside the
// memory limit, so that a job cannot page past it.
Status write_limits(const CgroupTree& tree, const std::string& dir, const JobLimits& limits);

// How many processes the kernel's OOM killer has killed in `dir` itself; 0 where `tree` has
// no memory controller. (v2 counts a cgroup's descendants' kills in it too, v1 does not:
// `hierarchical` says which.)
uint64_t oom_kills(const CgroupTree& tree, const std::string& dir, bool* hierarchical = nullptr);

}  // namespace corral::node
