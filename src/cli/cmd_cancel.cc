// corral cancel ID... | -u USER | -t STATES: cancel jobs or signal their tasks (scancel).
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/job_ids.h"
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
  for (uint64_t id : parse_jobids_or_exit("cancel", st.ids)) req.add_jobids(id);
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
  if (req.jobids_size() == 0 && !req.has_userid() && req.states_size() == 0)
    usage_error("cancel", "no jobs given (give job ids, or select with -u/--user or -t/--states)");
  req.set_message(st.message);
  return req;
}

void run_cancel(const Globals& g, const CancelState& st) {
  pb::CancelRequest req = make_request(st);
  Client client(resolve_uri(g.uri));
  auto reply = expect_ok("cancel", client.cancel(req));
  bool failed = false;
  for (const auto& r : reply.results()) {
    if (!r.ok()) {
      fmt::print(stderr, "corral cancel: job {}: {}\n", r.jobid(), r.error());
      failed = true;
    } else if (st.verbose) {
      fmt::print(stderr, "corral cancel: job {}: {}\n", r.jobid(),
                 req.signal() ? "signalled" : "canceled");
    }
  }
  if (failed) throw CLI::RuntimeError(kExitFailure);
}

}  // namespace

void add_cancel_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<CancelState>();
  CLI::App* sub = app.add_subcommand(
      "cancel", "Cancel jobs or signal their tasks (like scancel)");
  sub->footer("Without ids, -u and -t select the active jobs to cancel.");
  sub->add_option("ID", st->ids, "Job ids")->expected(-1);
  sub->add_option("-s,--signal", st->signal,
                  "Send this signal (TERM, USR1, 9, ...) to the tasks instead of canceling")
      ->type_name("SIG");
  sub->add_option("-u,--user", st->user, "Cancel the active jobs of this user")
      ->type_name("USER");
  sub->add_option("-t,--states", st->states,
                  "Cancel active jobs in these states (pending, running, ...)")
      ->type_name("STATES");
  sub->add_option("-m,--message", st->message, "A note recorded with the cancellation")
      ->type_name("TEXT");
  sub->add_flag("-v,--verbose", st->verbose, "Report every job");
  sub->callback([&g, st] { run_cancel(g, *st); });
}

}  // namespace corral::cli
