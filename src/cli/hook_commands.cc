#include "cli/hook_commands.h"

#include "fabric/infiniband/cli/ib_command.h"
#include "fabric/slingshot/cli/slingshot_command.h"
#include "storage/dws/cli/dws_command.h"

namespace corral::cli {

void add_hook_commands(CLI::App& app, Globals& g) {
  fabric::slingshot::add_slingshot_command(app, g);
  storage::dws::add_dws_command(app, g);
  fabric::infiniband::add_ib_command(app, g);
}

}  // namespace corral::cli
