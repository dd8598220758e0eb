// corral alloc [OPTIONS] [COMMAND...]: get an allocation and run an interactive shell (or
// COMMAND) in it, like salloc. Steps started from that shell (corral run) run inside the
// allocation; it ends when the shell exits.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_submit.h"
#include "cli/progress.h"
#include "cli/step_attach.h"
#include "cli/step_spec.h"
#include "cli/step_target.h"

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct AllocState {
  JobOptions job;
  SubmitFlags flags;
  std::vector<std::string> command;
};

std::vector<std::string> shell_command(const std::vector<std::string>& command) {
  if (!command.empty()) return command;
  if (const char* shell = std::getenv("SHELL"); shell && *shell) return {shell};
  return {"/bin/sh"};
}

// The jobspec of an allocation: the job options, a placeholder command the agent never
// runs, and attributes.system.alloc.
// `command_given`: COMMAND was typed (it names the job), else the shell runs ("interactive").
pb::SubmitRequest alloc_request(const AllocState& st, const JobContext& ctx, const std::vector<std::string>& command,
                                bool command_given) {
  ParsedJob job = parse_or_exit("alloc", st.job, ctx);
  job.request.command = {"true"};
  if (job.request.name.empty())
    job.request.name = command_given ? std::filesystem::path(command.front()).filename().string() : "interactive";
  pb::SubmitRequest req = build_submit_request("alloc", job, st.flags);
  auto doc = nlohmann::json::parse(req.jobspecs(0));
  doc["attributes"]["system"]["alloc"] = true;
  req.set_jobspecs(0, doc.dump());
  return req;
}

void cancel_job(Client& client, uint64_t id, std::string_view why) {
  pb::CancelRequest req;
  req.add_jobids(id);
  req.set_message(std::string(why));
  auto reply = client.cancel(req);
  if (!reply) fmt::print(stderr, "corral alloc: could not cancel job {}: {}\n", id, reply.message());
}

// Polls the controller until the job runs (its step manager is known); Ctrl-C, SIGTERM
// or SIGHUP meanwhile cancel the job. Returns the job as it started.
pb::JobInfo wait_for_start(Client& client, uint64_t id, const StepSignals& signals) {
  ProgressLine progress;
  const auto begin = Clock::now();
  bool announced = false;
  for (int interval = 20;; interval = std::min(interval * 2, 500)) {
    pb::GetJobRequest req;
    req.set_jobid(id);
    auto info = client.get_job(req);
    if (!info) {
      cancel_job(client, id, "corral alloc could not follow the job");
      fail_rpc("alloc", info.error());
    }
    if (!info->stepmgr().empty()) return *info;
    if (info->state() == "INACTIVE" || info->state() == "CLEANUP") {
      progress.clear();
      std::string why = info->exception_type().empty()
                            ? info->result()
                            : fmt::format("{}: {}", info->exception_type(), info->exception_note());
      fail("alloc", fmt::format("job {} ended before it started ({})", id, why));
    }
    const double waited = std::chrono::duration<double>(Clock::now() - begin).count();
    if (waited >= 1.0) {
      const std::string reason = info->reason().empty() ? "" : " (" + info->reason() + ")";
      if (progress.enabled()) {
        progress.show(fmt::format("corral alloc: job {} waiting for resources{} {:.0f}s", id, reason, waited));
      } else if (!announced) {
        fmt::print(stderr, "corral alloc: job {} waiting for resources{}\n", id, reason);
      }
      announced = true;
    }
    if (int sig = signals.wait(interval); sig != 0 && sig != SIGWINCH) {
      progress.clear();
      cancel_job(client, id, "corral alloc was interrupted");
      fmt::print(stderr, "corral alloc: canceled job {}\n", id);
      throw CLI::RuntimeError(128 + sig);
    }
  }
}

pb::StepSpec interactive_spec(uint64_t id, const JobContext& ctx, const std::vector<std::string>& argv) {
  pb::StepSpec spec;
  spec.set_jobid(id);
  for (const auto& a : argv) spec.add_argv(a);
  set_step_env(spec, ctx.env);
  spec.set_cwd(ctx.cwd);
  spec.set_interactive(true);
  spec.set_overlap(true);
  spec.set_pty(::isatty(0) == 1);
  spec.set_stdin_open(true);
  spec.set_name(std::filesystem::path(argv.front()).filename().string());
  return spec;
}

void run_alloc(const Globals& g, const AllocState& st) {
  const std::vector<std::string>& given = g.command.empty() ? st.command : g.command;
  const std::vector<std::string> command = shell_command(given);
  const JobContext ctx = current_context();
  pb::SubmitRequest req = alloc_request(st, ctx, command, !given.empty());
  if (dry_run(st.flags, req)) return;
  StepSignals signals;  // before the client, so gRPC's threads inherit the blocked mask
  Client client(resolve_uri(g.uri));
  const uint64_t id = submit_request(client, "alloc", st.flags, req).front();
  if (st.flags.verbose) fmt::print(stderr, "corral alloc: job {}\n", id);
  const pb::JobInfo job = wait_for_start(client, id, signals);
  fmt::print(stderr, "corral alloc: granted job {} on {}\n", id, job.nodelist());
  StepClient steps(job.stepmgr(), id);
  pb::StepSpec spec = interactive_spec(id, ctx, command);
  AttachOptions opts;
  opts.cmd = "alloc";
  opts.verbose = st.flags.verbose;
  opts.pty = spec.pty();
  StepOutcome outcome;
  {
    std::unique_ptr<RawTerminal> raw;
    if (opts.pty) raw = std::make_unique<RawTerminal>();
    outcome = attach_step(steps, spec, opts, signals);
  }
  // Without its interactive step the allocation would hold its nodes until the time limit.
  if (!outcome.started) cancel_job(client, id, "the interactive step of corral alloc did not start");
  if (st.flags.verbose) fmt::print(stderr, "corral alloc: job {} ends (exit code {})\n", id, outcome.exit_code);
  if (outcome.exit_code != 0) throw CLI::RuntimeError(outcome.exit_code);
}

}  // namespace

void add_alloc_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<AllocState>();
  CLI::App* sub = app.add_subcommand("alloc", "Get an allocation and run a shell (or COMMAND) in it (like salloc)");
  g.takes_command.insert("alloc");
  add_job_options(*sub, st->job);
  sub->add_flag("--dry-run", st->flags.dry_run, "Print the jobspec instead of submitting it");
  sub->add_flag("-v,--verbose", st->flags.verbose, "Say what is sent where");
  sub->add_option("COMMAND", st->command, "What to run in the allocation (default: $SHELL)")->expected(-1);
  sub->footer(
      "Waits for the resources, then runs COMMAND (default: your $SHELL) on the job's first\n"
      "node with your terminal; corral run inside it starts steps on the allocation. The job\n"
      "ends when COMMAND exits, and corral alloc exits with its code. Interrupting corral\n"
      "alloc before the resources are granted cancels the job.\n\n"
      "Example: corral alloc -N4 -t 1h");
  sub->callback([&g, st] { run_alloc(g, *st); });
}

}  // namespace corral::cli
