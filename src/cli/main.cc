// corral: the command line of the corral workload manager.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/argv_split.h"
#include "cli/client/client.h"
#include "cli/client/grpc_channel.h"
#include "cli/commands.h"
#include "cli/hook_commands.h"
#include "cli/hostlist_command.h"

namespace {

using corral::cli::Globals;

using AddCommand = void (*)(CLI::App&, Globals&);

void add_hostlist(CLI::App& app, Globals&) { corral::add_hostlist_command(app); }

// What builds each command, in `corral --help`'s order. Setting up CLI11 for every command
// costs more than running most of them, so `corral X` builds X alone.
constexpr std::pair<std::string_view, AddCommand> kCommands[] = {
    {"start", corral::cli::add_start_command},
    {"submit", corral::cli::add_submit_command},
    {"run", corral::cli::add_run_command},
    {"alloc", corral::cli::add_alloc_command},
    {"steps", corral::cli::add_steps_command},
    {"batch", corral::cli::add_batch_command},
    {"queue", corral::cli::add_queue_command},
    {"cancel", corral::cli::add_cancel_command},
    {"show", corral::cli::add_show_command},
    {"eventlog", corral::cli::add_eventlog_command},
    {"wait", corral::cli::add_wait_command},
    {"history", corral::cli::add_history_command},
    {"nodes", corral::cli::add_nodes_command},
    {"drain", corral::cli::add_drain_commands},
    {"resume", corral::cli::add_drain_commands},
    {"topo", corral::cli::add_topo_command},
    {"sim", corral::cli::add_sim_command},
    {"slingshot", corral::cli::add_hook_commands},
    {"dws", corral::cli::add_hook_commands},
    {"ib", corral::cli::add_hook_commands},
    {"hostlist", add_hostlist},
};

// Only --version asked, no command and no help: nothing but the global options is needed.
bool only_version(const std::vector<std::string>& args) {
  bool version = false;
  for (const auto& a : args) {
    if (a == "-h" || a == "--help" || a == "--help-all") return false;
    version = version || a == "--version";
  }
  return version;
}

void build_app(CLI::App& app, Globals& g, const std::vector<std::string>& args) {
  app.set_version_flag("--version", std::string("corral ") + CORRAL_VERSION);
  app.add_option("--uri", g.uri,
                 "Controller address: unix:PATH or HOST:PORT (default: $CORRAL_URI, else "
                 "unix:/run/corral/corrald.sock)")
      ->type_name("URI");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("Run 'corral COMMAND --help' for the options of a command.");
  const size_t at = corral::cli::find_positional(app, args, 0);
  if (at < args.size())
    for (const auto& [name, add] : kCommands)
      if (args[at] == name) return add(app, g);
  if (at >= args.size() && only_version(args)) return;
  // No command, or not one of ours: all of them, for the list and for the error.
  std::set<AddCommand> done;
  for (const auto& [name, add] : kCommands)
    if (done.insert(add).second) add(app, g);
}

// The name to blame in an error: the deepest subcommand that was recognised.
std::string command_path(const CLI::App& app) {
  std::string path;
  const CLI::App* cur = &app;
  while (!cur->get_subcommands().empty()) {
    cur = cur->get_subcommands().front();
    path += (path.empty() ? "" : " ") + cur->get_name();
  }
  return path;
}

// CLI11's "The following argument was not expected: --x" said the way users expect.
std::string parse_error_text(const CLI::ParseError& e) {
  std::string msg = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) return msg;
  const size_t colon = msg.find(": ");
  const std::string words = colon == std::string::npos ? msg : msg.substr(colon + 2);
  const bool option = !words.empty() && words[0] == '-';
  return fmt::format("{} '{}'", option ? "unknown option" : "unexpected argument", words);
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  const std::string path = command_path(app);
  const std::string text = parse_error_text(e);
  if (path.empty()) {
    fmt::print(stderr, "corral: {}\nRun 'corral --help' for the list of commands.\n", text);
  } else {
    fmt::print(stderr, "corral {}: {}\nRun 'corral {} --help' for more information.\n", path, text, path);
  }
  return corral::cli::kExitUsage;
}

// CLI11 says only "A subcommand is required" for a misspelt command; name it instead.
bool check_command_name(const CLI::App& app, const std::vector<std::string>& args) {
  const size_t at = corral::cli::find_positional(app, args, 0);
  if (at >= args.size()) return true;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->check_name(args[at])) return true;
  fmt::print(stderr, "corral: unknown command '{}'\nRun 'corral --help' for the list of commands.\n", args[at]);
  return false;
}

int run_command(int argc, char** argv) {
  Globals g;
  CLI::App app{"corral: run and manage jobs on a corral cluster", "corral"};
  std::vector<std::string> args(argv + 1, argv + argc);
  build_app(app, g, args);
  if (!check_command_name(app, args)) return corral::cli::kExitUsage;
  g.command = corral::cli::split_trailing_command(app, g.takes_command, args);
  std::reverse(args.begin(), args.end());  // CLI11 consumes a vector from the back
  // Parsed, before the command runs (and reads its standard input): a command that will
  // need gRPC is run by corral-grpc from the start (client/grpc_channel.h).
  app.parse_complete_callback([&app, &g] {
    const auto subs = app.get_subcommands();
    corral::cli::hand_off_before(subs.empty() ? std::string() : subs.front()->get_name(),
                                 corral::cli::resolve_uri(g.uri));
  });
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "corral: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

// Every command has finished its work, and undone what it had to, when run_command returns;
// what is left are the static destructors of gRPC, protobuf and CLI11, about a tenth of a
// short command's time. Output is flushed, then the process ends without them.
int main(int argc, char** argv) {
  const int code = run_command(argc, argv);
  std::fflush(nullptr);
  std::_Exit(code);
}
