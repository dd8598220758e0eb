// Which CPUs a task may run on: the PUs of the cores its job or step holds on the node
// (like Flux's default affinity, and Slurm's task/affinity binding to the allocation).
#pragma once

#include <string>
#include <vector>

#include "node/hardware.h"
#include "util/result.h"

namespace corral::node {

// The OS CPU numbers of `cores` (an idset of corral core ids, "0-3,8") on `node`, sorted;
// empty when the node has no CPU map (a virtual node) or binding is off. An id the node
// does not have is an error naming it.
Result<std::vector<int>> cpus_of_cores(const NodeHardware& node, const std::string& cores);

// "0-3,8": the form corral-imp takes and /proc/PID/status prints (Cpus_allowed_list).
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace corral::node
