// `corral ib classes|pool|show`: the node classes the infiniband hook sees (nodes with
// identical Infiniband capabilities, degraded members flagged), its partition keys and
// GUIDs, and inside a job the interfaces it was given ($CORRAL_IB_CONFIG). Registered by
// the CLI's hook command registry (src/cli/hook_commands.cc).
#pragma once

#include "cli/commands.h"

namespace corral::fabric::infiniband {

void add_ib_command(CLI::App& app, cli::Globals& g);

}  // namespace corral::fabric::infiniband
