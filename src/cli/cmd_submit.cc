// corral submit [OPTIONS] COMMAND [ARGS...] | --jobspec FILE: queue a job, print its id.
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/job_submit.h"
#include "cli/jobspec_file.h"
#include "cli/mpi_detect.h"

namespace corral::cli {

namespace {

struct SubmitState {
  JobOptions job;
  SubmitFlags flags;
  std::vector<std::string> command;  // only if the words weren't split off before CLI11
  std::string jobspec_file;          // --jobspec: submit this document as it is
};

// The job options a jobspec file cannot be combined with: it already says all of that.
// --urgency and --cc are about the submission, not the job, so they stay allowed.
void check_jobspec_alone(const CLI::App& sub, const std::vector<std::string>& command) {
  if (!command.empty())
    usage_error("submit", fmt::format("--jobspec: unexpected COMMAND '{}' (the jobspec holds "
                                      "the command)",
                                      command.front()));
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_group() != "Job options" || opt->count() == 0) continue;
    const std::string name = opt->get_name();
    if (name == "--urgency" || name == "--cc") continue;
    usage_error("submit", fmt::format("--jobspec cannot be combined with {} (edit the "
                                      "jobspec instead)",
                                      name));
  }
}

void run_submit_jobspec(const Globals& g, const SubmitState& st, const CLI::App& sub,
                        const std::vector<std::string>& command) {
  check_jobspec_alone(sub, command);
  ParsedJob opts = parse_or_exit("submit", st.job, current_context());
  auto spec = read_jobspec_file(st.jobspec_file);
  if (!spec) {
    if (spec.error().code == Errc::io_error) fail("submit", spec.message());
    usage_error("submit", spec.message());
  }
  pb::SubmitRequest req;
  req.add_jobspecs(job::jobspec_to_string(*spec));
  if (!opts.cc.empty()) req.set_cc(opts.cc);
  if (opts.urgency) {
    req.set_urgency(*opts.urgency);
    req.set_has_urgency(true);
  }
  if (dry_run(st.flags, req)) return;
  Client client(resolve_uri(g.uri));
  for (uint64_t id : submit_request(client, "submit", st.flags, req)) fmt::print("{}\n", id);
}

void run_submit(const Globals& g, const SubmitState& st, const CLI::App& sub) {
  const std::vector<std::string>& command = g.command.empty() ? st.command : g.command;
  if (!st.jobspec_file.empty()) return run_submit_jobspec(g, st, sub, command);
  if (command.empty()) usage_error("submit", "missing COMMAND (e.g. corral submit -N2 hostname)");
  const JobContext ctx = current_context();
  ParsedJob job = parse_or_exit("submit", st.job, ctx);
  job.request.command = command;
  if (job.request.mpi.empty()) job.request.mpi = mpi_for_program(command.front(), ctx);
  if (job.request.output.empty()) job.request.output = kDefaultJobOutput;
  pb::SubmitRequest req = build_submit_request("submit", job, st.flags);
  if (dry_run(st.flags, req)) return;
  Client client(resolve_uri(g.uri));
  for (uint64_t id : submit_request(client, "submit", st.flags, req)) fmt::print("{}\n", id);
}

}  // namespace

void add_submit_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<SubmitState>();
  CLI::App* sub = app.add_subcommand("submit", "Queue a job that runs COMMAND and print its id (like sbatch --wrap)");
  g.takes_command.insert("submit");
  add_job_options(*sub, st->job);
  sub->add_option("--jobspec", st->jobspec_file,
                  "Submit this jobspec (RFC 25 JSON or YAML; - reads stdin) instead of a "
                  "COMMAND and job options")
      ->type_name("FILE");
  sub->add_flag("--dry-run", st->flags.dry_run, "Print the jobspec instead of submitting it");
  sub->add_flag("-v,--verbose", st->flags.verbose, "Say what is sent where");
  sub->add_option("COMMAND", st->command, "The command to run and its arguments")->expected(-1);
  sub->footer(
      "Prints the job id (one per line with --cc). Output goes to corral-<jobid>.out in the\n"
      "current directory unless -o/-e say otherwise.\n\n"
      "With --jobspec the document is submitted as written (only --urgency and --cc may\n"
      "be added); its output goes where its attributes.system.shell.options say.\n\n"
      "Example: corral submit -N2 -n8 -t 10 ./simulate --steps 100");
  sub->callback([&g, st, sub] { run_submit(g, *st, *sub); });
}

}  // namespace corral::cli
