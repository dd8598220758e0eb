// The node half of the infiniband hook: corral-node's --ib-sysfs, the node's devices
// reported to the controller (NodeHook::hardware, JSON), and a job's interfaces in its
// tasks' environment (CORRAL_IB_DEVICES, UCX_NET_DEVICES, NCCL_IB_HCA, CORRAL_IB_CONFIG)
// from the document the prolog wrote. Its controller half is IbHook (ib_hook.h).
#pragma once

#include <memory>

#include "hook/node_hook.h"

namespace corral::fabric::infiniband {

std::unique_ptr<hook::NodeHook> make_ib_node_hook();

}  // namespace corral::fabric::infiniband
