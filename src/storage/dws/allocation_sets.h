// How much of which rabbits a storage directive gets: the WLM's half of DWS Setup, which
// fills each Servers object from its DirectiveBreakdown and the job's nodes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace corral::storage::dws {

// Servers.spec.allocationSets for one DirectiveBreakdown's status.storage.allocationSets,
// given how many of the job's nodes each rabbit serves (rabbit name, node count) and the
// job's node count. Sizes as NNF expects them; `min_bytes` is the smallest allocation.
Result<nlohmann::json> allocation_sets(const nlohmann::json& breakdown_sets,
                                       const std::vector<std::pair<std::string, unsigned>>& nodes_per_rabbit,
                                       unsigned node_count, uint64_t min_bytes);

}  // namespace corral::storage::dws
