// What this machine offers: discovered with hwloc when the agent runs for real.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace corral::node {

struct NodeHardware {
  std::string name;
  uint32_t cores = 0;
  uint32_t gpus = 0;
  uint64_t memory_mb = 0;
  // The operating system's CPU numbers (PUs) of each core, by corral's core id. Empty for
  // virtual nodes, whose cores are not the machine's: their tasks are not bound.
  std::vector<std::vector<int>> core_cpus;
};

// The host name up to its first dot.
std::string short_hostname();

// Cores = physical cores (PUs when hwloc sees no cores), memory = total memory (the
// kernel's MemTotal, or hwloc's NUMA sum if larger),
// core_cpus = each core's PUs by OS index, cores in hwloc's logical order,
// GPUs = distinct GPU / co-processor devices (hwloc OS devices, one per PCI device, so
// a GPU seen through several APIs counts once).
Result<NodeHardware> discover_hardware();

}  // namespace corral::node
