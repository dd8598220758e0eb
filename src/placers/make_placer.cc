// make_placer: one placer per topology kind.
#include "placers/placers.h"
#include "topology/topology.h"

namespace corral::topology {

std::unique_ptr<Placer> make_placer(const Topology& topo) {
  switch (topo.kind) {
    case Kind::tree:
      return make_tree_placer(topo, /*dragonfly=*/false);
    case Kind::dragonfly:
      return make_tree_placer(topo, /*dragonfly=*/true);
    case Kind::block:
      return make_block_placer(topo);
    case Kind::torus:
      return make_torus_placer(topo);
    case Kind::flat:
      break;
  }
  return make_flat_placer();
}

}  // namespace corral::topology
