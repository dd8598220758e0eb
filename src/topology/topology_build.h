// Building a Topology from parsed definitions, shared by the topology.conf and
// topology.yaml parsers and the generators, so both syntaxes get the same checks and the
// same messages ("FILE:LINE: problem").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/topology.h"
#include "util/result.h"

namespace corral::topology::detail {

// "FILE:LINE" (or FILE alone when the line is unknown).
std::string where(const std::string& file, unsigned line);

// A hostlist expression expanded, or "FILE:LINE: KEY=EXPR: why" on error.
Result<std::vector<std::string>> expand_hostlist(const std::string& expr, const std::string& key,
                                                 const std::string& file, unsigned line);

// One switch as written: child switches by name, resolved by build_switches.
struct SwitchDef {
  std::string name;
  std::vector<std::string> children;
  std::vector<std::string> nodes;
  uint64_t link_speed = 0;
  unsigned line = 0;
};

// Resolves child names (an undefined one is an error naming the line), rejects switches
// with both or neither of children and nodes, fills t.switches and calls finalize.
Status build_switches(Topology& t, std::vector<SwitchDef> defs, const std::string& file);

// Checks base blocks (all the same size) and BlockSizes (ascending, the first the base
// block size, each a multiple of the one before), then finalizes. `sizes_line` is where
// BlockSizes was given, for messages.
Status build_blocks(Topology& t, const std::string& file, unsigned sizes_line);

// Parses "a,b,c" as positive integers (BlockSizes=, Coords=).
Result<std::vector<long>> parse_number_list(const std::string& text, const std::string& key, const std::string& file,
                                            unsigned line);

// Torus nodes named by a hostlist: coordinates from the last three base-36 characters.
Result<std::vector<TorusNode>> torus_from_names(const std::vector<std::string>& names, const std::string& file,
                                                unsigned line);

// Switch and block names become hostlist items and CORRAL_TOPOLOGY_ADDR components, so
// they may not contain separators: an error naming `what` (e.g. "switch") otherwise.
Status check_unit_name(const std::string& name, const std::string& what, const std::string& file, unsigned line);

// Rejects a node named twice (lines[i] is where torus node i was given), then finalizes.
Status build_torus(Topology& t, const std::vector<unsigned>& lines, const std::string& file);

}  // namespace corral::topology::detail
