#include "node/hooks/registry.h"

#include "fabric/infiniband/ib_node_hook.h"
#include "fabric/slingshot/slingshot_node_hook.h"
#include "storage/dws/node/dws_node_hook.h"

namespace corral::node {

NodeHooks make_node_hooks() {
  std::vector<std::unique_ptr<hook::NodeHook>> hooks;
  hooks.push_back(fabric::slingshot::make_slingshot_node_hook());
  hooks.push_back(storage::dws::make_dws_node_hook());
  hooks.push_back(fabric::infiniband::make_ib_node_hook());
  return NodeHooks(std::move(hooks));
}

}  // namespace corral::node
