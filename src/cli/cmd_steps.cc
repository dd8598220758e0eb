// corral steps [JOBID...]: the steps of running jobs (like squeue -s): the live ones from
// each job's step manager, the finished ones the controller recorded.
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/client/step_client.h"
#include "cli/commands.h"
#include "cli/job_ids.h"
#include "cli/step_format.h"
#include "cli/table.h"
#include "cli/values.h"
#include "job/eventlog.h"

namespace corral::cli {

namespace {

struct StepsState {
  std::vector<std::string> jobs;
  bool json = false;
  bool noheader = false;
};

// The jobs to look at: as given, else $CORRAL_JOBID, else the caller's running jobs.
std::vector<pb::JobInfo> jobs_to_show(Client& client, const StepsState& st) {
  std::vector<uint64_t> ids = parse_jobids_or_exit("steps", st.jobs);
  if (ids.empty()) {
    if (const char* env = std::getenv("CORRAL_JOBID"); env && *env) {
      auto id = parse_jobid(env);
      if (!id) fail("steps", "CORRAL_JOBID in the environment: " + id.message());
      ids.push_back(*id);
    }
  }
  std::vector<pb::JobInfo> jobs;
  if (ids.empty()) {
    pb::ListJobsRequest req;
    req.add_userids(static_cast<uint32_t>(::getuid()));
    req.add_states("running");
    auto reply = expect_ok("steps", client.list_jobs(req));
    jobs.assign(reply.jobs().begin(), reply.jobs().end());
    return jobs;
  }
  for (uint64_t id : ids) {
    pb::GetJobRequest req;
    req.set_jobid(id);
    jobs.push_back(expect_ok("steps", client.get_job(req)));
  }
  return jobs;
}

// The job's steps as its step manager sees them; none (with a warning) if it can't be asked.
std::vector<pb::StepInfo> live_steps(const pb::JobInfo& job) {
  if (job.stepmgr().empty()) return {};
  StepClient steps(job.stepmgr(), job.id());
  auto reply = steps.list_steps(job.id());
  if (!reply) {
    fmt::print(stderr, "corral steps: job {}: {} (showing finished steps only)\n", job.id(), reply.message());
    return {};
  }
  return {reply->steps().begin(), reply->steps().end()};
}

std::vector<pb::StepInfo> recorded_steps(Client& client, const pb::JobInfo& job) {
  auto reply = client.list_steps(job.id());
  if (!reply) {
    fmt::print(stderr, "corral steps: job {}: {}\n", job.id(), reply.message());
    return {};
  }
  return {reply->steps().begin(), reply->steps().end()};
}

void print_table(const std::vector<pb::StepInfo>& steps, bool header) {
  using A = Table::Align;
  Table t({{"STEPID"},
           {"NAME"},
           {"STATE"},
           {"NODES", A::right},
           {"TASKS", A::right},
           {"CPUS", A::right},
           {"TIME", A::right},
           {"NODELIST"}});
  const double now = job::now();
  for (const auto& s : steps) t.add_row(step_cells(s, now));
  fmt::print("{}", t.render(header));
}

void run_steps(const Globals& g, const StepsState& st) {
  Client client(resolve_uri(g.uri));
  std::vector<pb::StepInfo> all;
  for (const auto& job : jobs_to_show(client, st)) {
    auto merged = merge_steps(live_steps(job), recorded_steps(client, job));
    all.insert(all.end(), merged.begin(), merged.end());
  }
  if (st.json) {
    auto doc = nlohmann::json::array();
    for (const auto& s : all) doc.push_back(step_to_json(s));
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  print_table(all, !st.noheader);
}

}  // namespace

void add_steps_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<StepsState>();
  CLI::App* sub = app.add_subcommand("steps", "List the steps of jobs (like squeue -s)");
  sub->add_option("JOBID", st->jobs,
                  "Jobs whose steps to list (default: $CORRAL_JOBID inside "
                  "an allocation, else your running jobs)")
      ->expected(-1);
  sub->add_flag("--json", st->json, "Print a JSON array of step objects");
  sub->add_flag("--noheader", st->noheader, "Leave out the header line");
  sub->footer(
      "Running and waiting steps come from each job's step manager, finished ones from the\n"
      "controller's records. STATE is PENDING, RUNNING, COMPLETED, FAILED or CANCELED;\n"
      "TIME is how long the step has run. See also: corral history.");
  sub->callback([&g, st] { run_steps(g, *st); });
}

}  // namespace corral::cli
