// The node halves of the hooks corral-node is built with: the one place on the node side
// that names concrete hooks. A new fabric or storage hook adds one line to registry.cc.
#pragma once

#include "node/exec/node_hooks.h"

namespace corral::node {

NodeHooks make_node_hooks();

}  // namespace corral::node
