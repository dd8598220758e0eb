// corral cancel ID[.STEP]... | -u USER | -t STATES: cancel jobs or steps, or signal their
// tasks (scancel).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cancel_targets.h"
#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/values.h"

namespace corral::cli {

namespace {

struct CancelState {
  std::vector<std::string> ids;
  std::string signal, user, message;
  std::vector<std::string> states;
  bool verbose = false;
};

pb::CancelRequest make_request(const CancelState& st) {
  pb::CancelRequest req;
  auto targets = parse_cancel_targets(st.ids);
  if (!targets) usage_error("cancel", targets.message());
  for (uint64_t id : targets->jobids) req.add_jobids(id);
  for (const auto& s : targets->steps) {
    pb::StepRef* ref = req.add_steps();
    ref->set_jobid(s.jobid);
    ref->set_step(job::step_name(s.step));
  }
  if (!st.signal.empty()) {
    auto sig = parse_signal("-s/--signal", st.signal);
    if (!sig) usage_error("cancel", sig.message());
    req.set_signal(*sig);
  }
  if (!st.user.empty()) {
    auto uid = parse_user("-u/--user", st.user);
    if (!uid) usage_error("cancel", uid.message());
    req.set_userid(*uid);
    req.set_has_userid(true);
  }
  for (const auto& s : st.states)
    for (const auto& part : split_list(s)) req.add_states(part);
  if (req.jobids_size() == 0 && req.steps_size() == 0 && !req.has_userid() && req.states_size() == 0)
    usage_error("cancel", "no jobs given (give job ids, or select with -u/--user or -t/--states)");
  req.set_message(st.message);
  return req;
}

// "job 42" or "step 42.3": results name only a job id, so a step's result is recognised
// by its place (the controller answers the jobs first, then the steps, in request order).
std::string what_of(const pb::CancelRequest& req, const pb::CancelReply& reply, int i) {
  const auto& r = reply.results(i);
  const int nsteps = req.steps_size();
  const int first_step = reply.results_size() - nsteps;
  if (nsteps > 0 && first_step == req.jobids_size() && i >= first_step) {
    const auto& ref = req.steps(i - first_step);
    if (ref.jobid() == r.jobid()) return fmt::format("step {}.{}", ref.jobid(), ref.step());
  }
  return fmt::format("job {}", r.jobid());
}

void run_cancel(const Globals& g, const CancelState& st) {
  pb::CancelRequest req = make_request(st);
  Client client(resolve_uri(g.uri));
  auto reply = expect_ok("cancel", client.cancel(req));
  bool failed = false;
  for (int i = 0; i < reply.results_size(); ++i) {
    const auto& r = reply.results(i);
    if (!r.ok()) {
      fmt::print(stderr, "corral cancel: {}: {}\n", what_of(req, reply, i), r.error());
      failed = true;
    } else if (st.verbose) {
      fmt::print(stderr, "corral cancel: {}: {}\n", what_of(req, reply, i), req.signal() ? "signalled" : "canceled");
    }
  }
  if (failed) throw CLI::RuntimeError(kExitFailure);
}

}  // namespace

void add_cancel_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<CancelState>();
  CLI::App* sub = app.add_subcommand("cancel", "Cancel jobs or signal their tasks (like scancel)");
  sub->footer(
      "Without ids, -u and -t select the active jobs to cancel. JOBID.STEP (42.3,\n"
      "42.batch, 42.interactive) cancels one step of a job, or signals it with -s; the job\n"
      "goes on.");
  sub->add_option("ID", st->ids, "Job ids, or JOBID.STEP for steps")->expected(-1);
  sub->add_option("-s,--signal", st->signal, "Send this signal (TERM, USR1, 9, ...) to the tasks instead of canceling")
      ->type_name("SIG");
  sub->add_option("-u,--user", st->user, "Cancel the active jobs of this user")->type_name("USER");
  sub->add_option("-t,--states", st->states, "Cancel active jobs in these states (pending, running, ...)")
      ->type_name("STATES");
  sub->add_option("-m,--message", st->message, "A note recorded with the cancellation")->type_name("TEXT");
  sub->add_flag("-v,--verbose", st->verbose, "Report every job");
  sub->callback([&g, st] { run_cancel(g, *st); });
}

}  // namespace corral::cli
