// The node half of the cray-slingshot hook: corral-node's --cxi backend, and the CXI
// services of a job's VNIs in its tasks' environment (SLINGSHOT_DEVICES, SLINGSHOT_SVC_IDS,
// SLINGSHOT_TCS). Its controller half is SlingshotHook (slingshot_hook.h).
#pragma once

#include <memory>

#include "hook/node_hook.h"

namespace corral::fabric::slingshot {

std::unique_ptr<hook::NodeHook> make_slingshot_node_hook();

}  // namespace corral::fabric::slingshot
