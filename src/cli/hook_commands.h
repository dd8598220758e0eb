// The `corral` subcommands that hooks bring (`corral slingshot`): the one place in the
// command line that names concrete hooks. A new hook with a command adds a line to
// hook_commands.cc; the rest of src/cli never names it.
#pragma once

#include "cli/commands.h"

namespace corral::cli {

void add_hook_commands(CLI::App& app, Globals& g);

}  // namespace corral::cli
