// Whether a request could ever run on the configured nodes, whatever they are doing now.
#pragma once

#include <optional>
#include <string>

#include "sched/resource_pool.h"

namespace corral::sched {

// nullopt if it could; else what cannot be satisfied, in words the user can act on.
std::optional<std::string> check_satisfiable(const ResourcePool& pool, const topology::Request& req);

}  // namespace corral::sched
