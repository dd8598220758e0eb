// The node side of the Slingshot hook at task launch: when the controller's hook gave the
// job SLINGSHOT_VNIS, this node's CXI services for those VNIs become SLINGSHOT_DEVICES,
// SLINGSHOT_SVC_IDS and SLINGSHOT_TCS; an empty SLINGSHOT_VNIS (no reservation) clears all
// four so applications fall back to the default service. Without the hook, nothing changes.
#pragma once

#include <cstdint>
#include <string>

#include "node/task_env.h"
#include "util/result.h"

namespace corral::node {

// `extra` is what the controller's hooks set; `env` the node environment being built.
Status add_slingshot_env(const std::string& cxi_spec, const std::string& node, uint32_t uid,
                         const EnvMap& extra, EnvMap& env);

}  // namespace corral::node
