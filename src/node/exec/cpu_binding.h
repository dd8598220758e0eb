// Which CPUs a task may run on: the PUs of the cores its job or step holds on the node
// (like Flux's default affinity, and Slurm's task/affinity binding to the allocation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/exec/agent_config.h"
#include "node/exec/hardware.h"
#include "util/result.h"

namespace corral::node {

// The OS CPU numbers of `cores` (an idset of corral core ids, "0-3,8") on `node`, sorted;
// empty when the node has no CPU map (a virtual node) or binding is off. An id the node
// does not have is an error naming it.
Result<std::vector<int>> cpus_of_cores(const NodeHardware& node, const std::string& cores);

// The CPUs of each of the `ntasks` tasks on node `name` that hold `cores` together:
// equal consecutive shares when the cores divide evenly (each rank on cores of its own,
// like Slurm's --cpu-bind=cores), else all of them for every task. Empty: unbound
// (binding off, a virtual node, or bad cores, which are logged).
std::vector<std::vector<int>> task_cpus(const AgentConfig& config, const std::string& name, const std::string& cores,
                                        uint32_t ntasks);

// "0-3,8": the form corral-imp takes and /proc/PID/status prints (Cpus_allowed_list).
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace corral::node
