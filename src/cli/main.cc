// corral: the command line of the corral workload manager.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/argv_split.h"
#include "cli/commands.h"
#include "cli/hook_commands.h"
#include "cli/hostlist_command.h"

namespace {

using corral::cli::Globals;

void build_app(CLI::App& app, Globals& g) {
  using namespace corral::cli;
  app.set_version_flag("--version", std::string("corral ") + CORRAL_VERSION);
  app.add_option("--uri", g.uri,
                 "Controller address: unix:PATH or HOST:PORT (default: $CORRAL_URI, else "
                 "unix:/run/corral/corrald.sock)")
      ->type_name("URI");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("Run 'corral COMMAND --help' for the options of a command.");
  add_start_command(app, g);
  add_submit_command(app, g);
  add_run_command(app, g);
  add_alloc_command(app, g);
  add_steps_command(app, g);
  add_batch_command(app, g);
  add_queue_command(app, g);
  add_cancel_command(app, g);
  add_show_command(app, g);
  add_eventlog_command(app, g);
  add_wait_command(app, g);
  add_history_command(app, g);
  add_nodes_command(app, g);
  add_drain_commands(app, g);
  add_topo_command(app, g);
  add_sim_command(app, g);
  add_hook_commands(app, g);
  corral::add_hostlist_command(app);
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

}  // namespace

int main(int argc, char** argv) {
  Globals g;
  CLI::App app{"corral: run and manage jobs on a corral cluster", "corral"};
  build_app(app, g);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!check_command_name(app, args)) return corral::cli::kExitUsage;
  g.command = corral::cli::split_trailing_command(app, g.takes_command, args);
  std::reverse(args.begin(), args.end());  // CLI11 consumes a vector from the back
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
  std::fflush(stdout);
  return 0;
}
