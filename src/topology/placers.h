// The topology placers, one per file; make_placer (topology.h) picks one by kind.
#pragma once

#include <memory>

#include "topology/placement.h"

namespace corral::topology {

struct Topology;

// tree_placer.cc: lowest common switch, best fit over its leaves, fewest leaves, then least
// hop distance. Dragonfly: one leaf if possible, else as many leaves as possible.
std::unique_ptr<Placer> make_tree_placer(const Topology& topo, bool dragonfly);
// block_placer.cc: smallest block level that fits, a subset of its lower-level blocks,
// best fit inside.
std::unique_ptr<Placer> make_block_placer(const Topology& topo);
// torus_placer.cc: nodes ordered along a Hilbert curve, then one-dimensional best fit.
std::unique_ptr<Placer> make_torus_placer(const Topology& topo);

}  // namespace corral::topology
