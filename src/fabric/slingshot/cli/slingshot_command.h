// `corral slingshot pool [--json]` and `corral slingshot clean NODES`: the VNI pool of the
// cray-slingshot hook (free, reserved, quarantined) and the admin's way to remove a node's
// leftover CXI services, both through the HookQuery rpc. Registered by the CLI's hook
// command registry (src/cli/hook_commands.cc).
#pragma once

#include "cli/commands.h"

namespace corral::fabric::slingshot {

void add_slingshot_command(CLI::App& app, cli::Globals& g);

}  // namespace corral::fabric::slingshot
