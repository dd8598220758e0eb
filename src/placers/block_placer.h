// Internal to topology/ and its tests: a consistency check of the block placer's aggregates.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "placers/placement.h"

namespace corral::topology {

// Recomputes the per-block and per-level aggregates of `placer` (made by make_block_placer)
// from `nodes` and returns a description of the first one that differs, or nullopt if all
// agree (also nullopt for other placers).
std::optional<std::string> block_aggregates_mismatch(const Placer& placer, const std::vector<NodeState>& nodes);

}  // namespace corral::topology
