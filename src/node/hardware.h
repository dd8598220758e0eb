// What this machine offers: discovered with hwloc when the agent runs for real.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace corral::node {

struct NodeHardware {
  std::string name;
  uint32_t cores = 0;
  uint32_t gpus = 0;
  uint64_t memory_mb = 0;
};

// The host name up to its first dot.
std::string short_hostname();

// Cores = physical cores (PUs when hwloc sees no cores), memory = total memory (the
// kernel's MemTotal, or hwloc's NUMA sum if larger),
// GPUs = distinct GPU / co-processor devices (hwloc OS devices, one per PCI device, so
// a GPU seen through several APIs counts once).
Result<NodeHardware> discover_hardware();

}  // namespace corral::node
