// `corral hostlist`: expand, compress, count, index and combine hostlists, like
// `flux hostlist` and `scontrol show hostnames`.
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace corral {

// Adds the `hostlist` subcommand and its operations to `app`. Errors are printed as
// "corral hostlist: <message>" and raised as CLI::RuntimeError(2).
void add_hostlist_command(CLI::App& app);

}  // namespace corral
