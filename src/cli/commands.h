// The subcommands of `corral`: each cmd_*.cc adds one (or a few) to the top-level app.
// A command reports failure by throwing CLI::RuntimeError(exit code) after printing its
// message, so main() has one place that turns outcomes into exit codes.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace CLI {
class App;
}

namespace corral::cli {

// Options of the top-level `corral` command, shared with every subcommand.
struct Globals {
  std::string uri;  // --uri; empty: CORRAL_URI or the default socket
  // Subcommands that end in a COMMAND... (submit, run, batch, start): main() splits the
  // words after their options off before CLI11 sees them, so `corral run ls -l` keeps
  // `-l` for ls. add_*_command() registers the name here.
  std::set<std::string> takes_command;
  std::vector<std::string> command;  // the split-off words, for that one subcommand
};

void add_submit_command(CLI::App& app, Globals& g);
void add_run_command(CLI::App& app, Globals& g);
void add_batch_command(CLI::App& app, Globals& g);
void add_queue_command(CLI::App& app, Globals& g);
void add_cancel_command(CLI::App& app, Globals& g);
void add_show_command(CLI::App& app, Globals& g);
void add_eventlog_command(CLI::App& app, Globals& g);
void add_wait_command(CLI::App& app, Globals& g);
void add_nodes_command(CLI::App& app, Globals& g);
void add_drain_commands(CLI::App& app, Globals& g);  // drain and resume
void add_start_command(CLI::App& app, Globals& g);
void add_topo_command(CLI::App& app, Globals& g);     // topo check/show/generate
void add_sim_command(CLI::App& app, Globals& g);      // the scheduling simulator
void add_alloc_command(CLI::App& app, Globals& g);    // an allocation with a shell (salloc)
void add_steps_command(CLI::App& app, Globals& g);    // steps of running jobs (squeue -s)
void add_history_command(CLI::App& app, Globals& g);  // finished jobs and steps (sacct)

// Exit codes: 0 success, 1 a failure reported by the controller or the job, 2 a usage
// error found before anything was sent.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// How a command reports an rpc error: Errc::unavailable is printed as
// "corral: cannot reach the controller at URI: ..." (the message already says it),
// anything else as "corral CMD: MESSAGE". Throws CLI::RuntimeError(1).
[[noreturn]] void fail_rpc(std::string_view cmd, const Error& err);

// The same report, then the process ends at once (exit_now) instead of unwinding: for a
// call that failed before the command started anything it would have to undo (a refused
// submission). A process's first exception costs ~0.05 ms (the unwinder finding and
// reading its tables), a twentieth of such a command's start.
[[noreturn]] void fail_rpc_now(std::string_view cmd, const Error& err);

template <class T>
T expect_ok(std::string_view cmd, Result<T> r) {
  if (!r.ok()) fail_rpc(cmd, r.error());
  return std::move(r).value();
}

// Prints "corral CMD: MESSAGE" to stderr and throws CLI::RuntimeError(code).
[[noreturn]] void fail(std::string_view cmd, std::string_view message, int code = kExitFailure);
// For usage errors: adds a hint to run --help, exits 2.
[[noreturn]] void usage_error(std::string_view cmd, std::string_view message);
// Ends the process at once with `code` once everything it had to say is written: skips
// gRPC's orderly teardown (joining its threads takes milliseconds, which a `corral run`
// per step would pay every time). Only for the end of a command, with no RPC in flight
// that matters.
[[noreturn]] void exit_now(int code);

}  // namespace corral::cli
