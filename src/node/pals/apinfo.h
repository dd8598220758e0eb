// Cray PMI's application file ("apinfo", format version 5), which a launcher writes on
// every node of a step for Cray MPICH: who the ranks are and where they run. Cray PMI
// reads it (PALS_APINFO names it) and bootstraps by itself from there; nothing else
// passes between it and corral. The file is the C structures of the format laid out as
// an LP64 compiler lays them out (x86-64 and aarch64 alike), with no encoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace corral::node::pals {

// A step's (or a job's own tasks') layout: ranks in blocks, node after node.
struct Layout {
  std::vector<std::string> nodes;  // host names, in the step's node order
  std::vector<uint32_t> tasks;     // ranks on each node
  uint32_t cpus_per_task = 1;
};

// Names the first thing the format cannot hold: no nodes, a node without ranks or a
// name longer than 63 bytes, more than 1,048,576 ranks.
Status check_layout(const Layout& layout);

// The whole file: header, one command (the step), a PE per rank, a node per node; no
// communication profiles and no NICs (Cray MPICH takes the job's Slingshot services from
// the SLINGSHOT_* variables the fabric hook sets), no distances.
Result<std::string> apinfo_bytes(const Layout& layout);

}  // namespace corral::node::pals
