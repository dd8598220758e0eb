// One agent per state directory: two agents sharing one would each take the other's
// tasks (and cgroups) for an earlier run's leftovers and kill them.
#pragma once

#include <string>

#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

// Locks DIR/lock (flock, held while the returned descriptor is open) and writes this
// process's pid into it. Fails with "... is in use by corral-node pid N" while another
// process holds it.
Result<UniqueFd> lock_state_dir(const std::string& dir);

}  // namespace corral::node
