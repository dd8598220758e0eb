// corral history: finished jobs and their steps, like sacct.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/history_format.h"
#include "cli/job_format.h"
#include "cli/job_ids.h"
#include "cli/step_format.h"
#include "cli/table.h"
#include "cli/values.h"
#include "job/eventlog.h"

namespace corral::cli {

namespace {

constexpr double kDefaultWindow = 24 * 3600;

struct HistoryState {
  std::vector<std::string> users, jobs, results;
  bool all_users = false;
  std::string since, until;
  unsigned max = 0;
  bool json = false;
  bool noheader = false;
};

void add_results(const HistoryState& st, pb::HistoryRequest& req) {
  for (const auto& item : st.results) {
    for (const auto& r : split_list(item)) {
      const std::string name = result_name(r);
      if (name != "COMPLETED" && name != "FAILED" && name != "CANCELED" && name != "TIMEOUT" && name != "OUT_OF_MEMORY")
        usage_error("history", fmt::format("--state: unknown result '{}' (use completed, "
                                           "failed, canceled, timeout or out_of_memory)",
                                           r));
      req.add_results(name);
    }
  }
}

pb::HistoryRequest make_request(const HistoryState& st, double now) {
  pb::HistoryRequest req;
  for (uint64_t id : parse_jobids_or_exit("history", st.jobs)) req.add_jobids(id);
  if (st.all_users && !st.users.empty()) usage_error("history", "give either -u/--user or --all-users, not both");
  for (const auto& item : st.users) {
    for (const auto& u : split_list(item)) {
      auto uid = parse_user("-u/--user", u);
      if (!uid) usage_error("history", uid.message());
      req.add_userids(*uid);
    }
  }
  // Like sacct: your own jobs unless told otherwise; asking for ids means those jobs.
  if (!st.all_users && req.userids_size() == 0 && req.jobids_size() == 0)
    req.add_userids(static_cast<uint32_t>(::getuid()));
  if (!st.since.empty()) {
    auto t = parse_history_time("-S/--starttime", st.since, now);
    if (!t) usage_error("history", t.message());
    req.set_since(*t);
  } else if (req.jobids_size() == 0) {
    req.set_since(now - kDefaultWindow);
  }
  if (!st.until.empty()) {
    auto t = parse_history_time("-E/--endtime", st.until, now);
    if (!t) usage_error("history", t.message());
    req.set_until(*t);
  }
  if (req.until() > 0 && req.since() > req.until()) usage_error("history", "-S/--starttime is after -E/--endtime");
  add_results(st, req);
  req.set_max_entries(st.max);
  return req;
}

void print_json(const pb::HistoryReply& reply) {
  auto doc = nlohmann::json::array();
  for (const auto& h : reply.jobs()) {
    nlohmann::json job = job_to_json(h.job());
    job["steps"] = nlohmann::json::array();
    std::vector<pb::StepInfo> steps(h.steps().begin(), h.steps().end());
    for (const auto& s : merge_steps({}, steps)) job["steps"].push_back(step_to_json(s));
    doc.push_back(std::move(job));
  }
  fmt::print("{}\n", doc.dump(2));
}

void print_table(const pb::HistoryReply& reply, bool header, double now) {
  using A = Table::Align;
  Table t({{"JOBID"},
           {"NAME"},
           {"USER"},
           {"STATE"},
           {"ELAPSED", A::right},
           {"EXIT", A::right},
           {"NODES", A::right},
           {"NODELIST"},
           {"CPUTIME", A::right}});
  for (auto& row : history_rows(reply, now)) t.add_row(std::move(row));
  fmt::print("{}", t.render(header));
}

void run_history(const Globals& g, const HistoryState& st) {
  const double now = job::now();
  pb::HistoryRequest req = make_request(st, now);
  Client client(resolve_uri(g.uri));
  auto reply = expect_ok("history", client.history(req));
  if (st.json)
    print_json(reply);
  else
    print_table(reply, !st.noheader, now);
}

}  // namespace

void add_history_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<HistoryState>();
  CLI::App* sub = app.add_subcommand("history", "Show finished jobs and their steps (like sacct)");
  sub->add_option("-u,--user", st->users, "Jobs of these users (names or uids, comma separated)")->type_name("USER");
  sub->add_flag("-a,--all-users", st->all_users, "Jobs of every user");
  sub->add_option("-j,--jobs", st->jobs, "Only these jobs (comma separated); any age")->type_name("IDS");
  sub->add_option("-S,--starttime", st->since, "Jobs that ended at or after TIME (default: now-24h)")
      ->type_name("TIME");
  sub->add_option("-E,--endtime", st->until, "Jobs that ended at or before TIME")->type_name("TIME");
  sub->add_option("-s,--state", st->results, "Only jobs with these results: completed, failed, canceled, timeout")
      ->type_name("RESULTS");
  sub->add_option("-n,--max", st->max, "At most this many jobs (the newest)")->type_name("N");
  sub->add_flag("--json", st->json, "Print a JSON array of jobs, each with its \"steps\"");
  sub->add_flag("--noheader", st->noheader, "Leave out the header line");
  sub->footer(
      "By default: your jobs that ended in the last 24 hours. TIME is now-1h, now-2days,\n"
      "YYYY-MM-DD[THH:MM[:SS]], HH:MM (today) or epoch seconds. Each job is followed by its\n"
      "steps (42.batch, 42.0, ...). EXIT is CODE:SIGNAL as in sacct; CPUTIME is the user and\n"
      "system CPU time of the tasks (on a job's line: its own tasks and its steps').");
  sub->callback([&g, st] { run_history(g, *st); });
}

}  // namespace corral::cli
