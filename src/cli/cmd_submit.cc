// corral submit [OPTIONS] COMMAND [ARGS...]: queue a job, print its id.
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/job_submit.h"

namespace corral::cli {

namespace {

constexpr const char* kDefaultOutput = "corral-%j.out";

struct SubmitState {
  JobOptions job;
  SubmitFlags flags;
  std::vector<std::string> command;  // only if the words weren't split off before CLI11
};

void run_submit(const Globals& g, const SubmitState& st) {
  const std::vector<std::string>& command = g.command.empty() ? st.command : g.command;
  if (command.empty())
    usage_error("submit", "missing COMMAND (e.g. corral submit -N2 hostname)");
  ParsedJob job = parse_or_exit("submit", st.job, current_context());
  job.request.command = command;
  if (job.request.output.empty()) job.request.output = kDefaultOutput;
  pb::SubmitRequest req = build_submit_request("submit", job);
  if (dry_run(st.flags, req)) return;
  Client client(resolve_uri(g.uri));
  for (uint64_t id : submit_request(client, "submit", st.flags, req)) fmt::print("{}\n", id);
}

}  // namespace

void add_submit_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<SubmitState>();
  CLI::App* sub = app.add_subcommand(
      "submit", "Queue a job that runs COMMAND and print its id (like sbatch --wrap)");
  g.takes_command.insert("submit");
  add_job_options(*sub, st->job);
  sub->add_flag("--dry-run", st->flags.dry_run, "Print the jobspec instead of submitting it");
  sub->add_flag("-v,--verbose", st->flags.verbose, "Say what is sent where");
  sub->add_option("COMMAND", st->command, "The command to run and its arguments")
      ->expected(-1);
  sub->footer(
      "Prints the job id (one per line with --cc). Output goes to corral-<jobid>.out in the\n"
      "current directory unless -o/-e say otherwise.\n\n"
      "Example: corral submit -N2 -n8 -t 10 ./simulate --steps 100");
  sub->callback([&g, st] { run_submit(g, *st); });
}

}  // namespace corral::cli
