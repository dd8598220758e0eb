// The placers, one per file, and make_placer, which picks one by the topology's kind.
// (Their namespace stays corral::topology: placement is the topology's use.)
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "placers/placement.h"
#include "topology/topology.h"

namespace corral::topology {

// The placer for a topology's kind (make_placer.cc); flat without one. The topology is copied.
std::unique_ptr<Placer> make_placer(const Topology& topo);

// Block topologies (block_placer.cc, the block placer's owner): a request the block
// placement cannot serve by design, with the message to reject its submission with
// (-w/--nodelist is not supported; -x is), or nullopt if the request is acceptable.
std::optional<std::string> block_request_error(const Request& req);

// tree_placer.cc: lowest common switch, best fit over its leaves, fewest leaves, then least
// hop distance. Dragonfly: one leaf if possible, else as many leaves as possible.
std::unique_ptr<Placer> make_tree_placer(const Topology& topo, bool dragonfly);
// block_placer.cc: smallest block level that fits, a subset of its lower-level blocks,
// best fit inside.
std::unique_ptr<Placer> make_block_placer(const Topology& topo);
// torus_placer.cc: nodes ordered along a Hilbert curve, then one-dimensional best fit.
std::unique_ptr<Placer> make_torus_placer(const Topology& topo);

}  // namespace corral::topology
