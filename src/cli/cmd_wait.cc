// corral wait ID...: block until the jobs are inactive; exit with the job's exit code
// (one job) or 0 if every job completed (several).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_ids.h"
#include "cli/job_watch.h"

namespace corral::cli {

namespace {

struct WaitState {
  std::vector<std::string> ids;
};

pb::ListJobsReply list(Client& client, const std::vector<uint64_t>& ids) {
  pb::ListJobsRequest req;
  for (uint64_t id : ids) req.add_jobids(id);
  req.add_states("all");
  return expect_ok("wait", client.list_jobs(req));
}

void check_all_known(const std::vector<uint64_t>& ids, const pb::ListJobsReply& reply) {
  for (uint64_t id : ids) {
    bool found = false;
    for (const auto& j : reply.jobs()) found = found || j.id() == id;
    if (!found) fail("wait", fmt::format("job {}: no such job", id));
  }
}

int outcome(const pb::ListJobsReply& reply) {
  if (reply.jobs_size() == 1) {
    const auto& j = reply.jobs(0);
    if (!j.exception_type().empty())
      fmt::print(stderr, "corral: job {}: exception: {}: {}\n", j.id(), j.exception_type(), j.exception_note());
    return job_exit_code(j);
  }
  int code = 0;
  for (const auto& j : reply.jobs()) {
    if (j.result() == "COMPLETED") continue;
    fmt::print(stderr, "corral wait: job {}: {}\n", j.id(), j.result().empty() ? j.state() : j.result());
    code = kExitFailure;
  }
  return code;
}

void run_wait(const Globals& g, const WaitState& st) {
  const std::vector<uint64_t> ids = parse_jobids_or_exit("wait", st.ids);
  Client client(resolve_uri(g.uri));
  pb::ListJobsReply jobs = list(client, ids);
  check_all_known(ids, jobs);
  // An ended job stays ended, so only the others are watched: waiting on many finished
  // jobs replays none of their eventlogs, and with all of them ended no watch is opened
  // (nor the gRPC runtime it needs).
  pb::WatchRequest req;
  for (const auto& j : jobs.jobs())
    if (j.state() != "INACTIVE") req.add_jobids(j.id());
  if (req.jobids_size() > 0) {
    req.add_events("clean");
    req.set_history(true);
    req.set_until_inactive(true);
    Status s = follow_jobs(client, req, "wait", [](const pb::WatchItem&) {});
    if (!s.ok()) fail_rpc("wait", s.error());
    jobs = list(client, ids);
  }
  if (int code = outcome(jobs); code != 0) throw CLI::RuntimeError(code);
}

}  // namespace

void add_wait_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<WaitState>();
  CLI::App* sub = app.add_subcommand("wait", "Wait until jobs finish; exit with the job's exit code");
  sub->footer(
      "Prints nothing on success. With one job, exits with its exit code (as corral run\n"
      "does); with several, 0 only if all completed.");
  sub->add_option("ID", st->ids, "Job ids")->required()->expected(-1);
  sub->callback([&g, st] { run_wait(g, *st); });
}

}  // namespace corral::cli
