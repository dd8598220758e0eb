// Tasks started by an earlier run of this agent outlive it when it is killed (kill -9, a
// crash). The controller then declares them lost and gives their cores to other jobs, and
// no later agent can adopt them, so a new agent ends them before it registers.
#pragma once

#include <cstddef>
#include <set>
#include <string>

namespace corral::node {

// SIGKILLs every process whose environment says it is a task of one of `nodes` under the
// controller at `controller_uri` (CORRAL_NODENAME and CORRAL_URI, which every task starts
// with) in this process's network namespace. Returns how many were killed. Processes it
// may not read are left alone.
size_t kill_orphaned_tasks(const std::string& controller_uri, const std::set<std::string>& nodes);

}  // namespace corral::node
