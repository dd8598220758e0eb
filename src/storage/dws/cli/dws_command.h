// `corral dws workflows` and `corral dws teardown JOBID`: the Rabbit storage workflows
// corrald drives (docs/admin.md "Rabbit storage (DWS)").
#pragma once

#include "cli/commands.h"

namespace corral::storage::dws {

void add_dws_command(CLI::App& app, cli::Globals& g);

}  // namespace corral::storage::dws
