#include "sched/feasibility.h"

#include <algorithm>

#include <fmt/format.h>

namespace corral::sched {
namespace {

using topology::Request;

std::vector<uint32_t> sorted_unique(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

unsigned per_task_cores(const Request& r) { return std::max(1u, r.cores_per_task); }

// Tasks of `r` an empty node of this configuration holds.
unsigned capacity(const Request& r, const NodeConfig& cfg) {
  if (cfg.memory_mb < r.mem_per_node_mb) return 0;
  unsigned cap = cfg.cores / per_task_cores(r);
  if (r.gpus_per_task > 0) cap = std::min(cap, cfg.gpus / r.gpus_per_task);
  return cap;
}

std::string task_size(const Request& r) {
  std::string s = fmt::format("{} core{}", per_task_cores(r), per_task_cores(r) == 1 ? "" : "s");
  if (r.gpus_per_task > 0) s += fmt::format(", {} GPUs", r.gpus_per_task);
  if (r.mem_per_node_mb > 0) s += fmt::format(", {} MB of memory", r.mem_per_node_mb);
  return s;
}

// Node lists that name nodes the job cannot have.
std::optional<std::string> check_node_lists(const ResourcePool& pool, const Request& r,
                                            const std::vector<uint32_t>& allowed) {
  for (uint32_t n : r.required_nodes) {
    if (n >= pool.size()) {
      return fmt::format("requested node index {} does not exist (the cluster has {} nodes)", n, pool.size());
    }
    if (!allowed.empty() && !std::binary_search(allowed.begin(), allowed.end(), n)) {
      return fmt::format("requested node {} is not in the allowed set", pool.config(n).name);
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_counts(const Request& r, size_t candidates, size_t required) {
  if (r.ntasks == 0) return "requested 0 tasks; a job needs at least one";
  if (r.nnodes > candidates) {
    return fmt::format("requested {} nodes but the partition has {} nodes (up or down)", r.nnodes, candidates);
  }
  if (r.nnodes > r.ntasks) {
    return fmt::format("requested {} nodes for {} tasks; every node needs at least one task", r.nnodes, r.ntasks);
  }
  if (r.nnodes > 0 && required > r.nnodes) {
    return fmt::format("requested {} specific nodes but only {} nodes in all", required, r.nnodes);
  }
  if (required > r.ntasks) {
    return fmt::format("requested {} specific nodes for {} tasks; every node needs a task", required, r.ntasks);
  }
  return std::nullopt;
}

// The largest node's size bounds one task.
std::optional<std::string> check_task_size(const Request& r, const std::vector<const NodeConfig*>& nodes) {
  unsigned max_cores = 0, max_gpus = 0;
  uint64_t max_mem = 0;
  for (const NodeConfig* cfg : nodes) {
    max_cores = std::max(max_cores, cfg->cores);
    max_gpus = std::max(max_gpus, cfg->gpus);
    max_mem = std::max(max_mem, cfg->memory_mb);
  }
  if (per_task_cores(r) > max_cores) {
    return fmt::format("requested {} cores per task but the largest node has {}", per_task_cores(r), max_cores);
  }
  if (r.gpus_per_task > max_gpus) {
    return fmt::format("requested {} GPUs per task but the largest node has {}", r.gpus_per_task, max_gpus);
  }
  if (r.mem_per_node_mb > max_mem) {
    return fmt::format("requested {} MB of memory per node but the largest node has {} MB", r.mem_per_node_mb, max_mem);
  }
  return std::nullopt;
}

// Whether the nodes, empty, hold all the tasks in the requested layout.
std::optional<std::string> check_layout(const Request& r, const std::vector<const NodeConfig*>& nodes) {
  std::vector<unsigned> caps;
  uint64_t total = 0;
  for (const NodeConfig* cfg : nodes) {
    caps.push_back(capacity(r, *cfg));
    total += caps.back();
  }
  if (total == 0) return fmt::format("no node can hold one task of {}", task_size(r));
  if (r.nnodes == 0) {
    if (total < r.ntasks) {
      return fmt::format("requested {} tasks of {} but the partition holds at most {} at once", r.ntasks, task_size(r),
                         total);
    }
    return std::nullopt;
  }
  unsigned base = r.ntasks / r.nnodes, extra = r.ntasks % r.nnodes;
  auto holding = [&](unsigned tasks) {
    return static_cast<size_t>(std::count_if(caps.begin(), caps.end(), [&](unsigned c) { return c >= tasks; }));
  };
  if (holding(base) < r.nnodes || holding(base + 1) < extra) {
    unsigned most = base + (extra > 0 ? 1 : 0);
    return fmt::format(
        "requested {} tasks on {} nodes (up to {} per node, each {}) but only {} "
        "nodes can hold that many",
        r.ntasks, r.nnodes, most, task_size(r), holding(most));
  }
  return std::nullopt;
}

std::optional<std::string> check_required_nodes(const ResourcePool& pool, const Request& r) {
  for (uint32_t n : r.required_nodes) {
    const NodeConfig& cfg = pool.config(n);
    if (capacity(r, cfg) == 0) {
      return fmt::format(
          "requested node {} cannot hold one task of {} (it has {} cores, {} "
          "GPUs, {} MB)",
          cfg.name, task_size(r), cfg.cores, cfg.gpus, cfg.memory_mb);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_satisfiable(const ResourcePool& pool, const Request& r) {
  std::vector<uint32_t> allowed = sorted_unique(r.allowed_nodes);
  std::erase_if(allowed, [&](uint32_t n) { return n >= pool.size(); });
  if (auto err = check_node_lists(pool, r, allowed)) return err;
  std::vector<const NodeConfig*> nodes;
  if (allowed.empty() && r.allowed_nodes.empty()) {
    for (uint32_t n = 0; n < pool.size(); ++n) nodes.push_back(&pool.config(n));
  } else {
    for (uint32_t n : allowed) nodes.push_back(&pool.config(n));
  }
  size_t required = sorted_unique(r.required_nodes).size();
  if (auto err = check_counts(r, nodes.size(), required)) return err;
  if (nodes.empty()) return std::string("the partition has no nodes");
  if (auto err = check_task_size(r, nodes)) return err;
  if (auto err = check_required_nodes(pool, r)) return err;
  return check_layout(r, nodes);
}

}  // namespace corral::sched
