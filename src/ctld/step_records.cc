// The controller's share of step management, which is small on purpose: it stores the
// finished-step records step managers send (accounting), answers ListSteps and History
// from the store, and passes `corral cancel JOB.STEP` on to the job's step manager.
#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ctld/controller.h"
#include "ctld/job_summary.h"
#include "job/step_id.h"

namespace corral::ctld {

using job::JobState;

namespace {

store::StepRecord to_record(const v1::StepInfo& s) {
  store::StepRecord r;
  r.jobid = s.jobid();
  r.step = s.step();
  r.userid = s.userid();
  r.name = s.name();
  r.state = s.state();
  r.nodelist = s.nodelist();
  r.nnodes = s.nnodes();
  r.ntasks = s.ntasks();
  r.ncores = s.ncores();
  r.t_submit = s.t_submit();
  r.t_start = s.t_start();
  r.t_end = s.t_end();
  r.waitstatus = s.waitstatus();
  r.cpu_seconds = s.cpu_seconds();
  r.command = s.command();
  return r;
}

void to_proto(const store::StepRecord& r, v1::StepInfo* s) {
  s->set_jobid(r.jobid);
  s->set_step(r.step);
  s->set_userid(r.userid);
  s->set_name(r.name);
  s->set_state(r.state);
  s->set_nodelist(r.nodelist);
  s->set_nnodes(r.nnodes);
  s->set_ntasks(r.ntasks);
  s->set_ncores(r.ncores);
  s->set_t_submit(r.t_submit);
  s->set_t_start(r.t_start);
  s->set_t_end(r.t_end);
  s->set_waitstatus(r.waitstatus);
  s->set_cpu_seconds(r.cpu_seconds);
  s->set_command(r.command);
}

// Result names as job::job_result spells them, given in any case ("CANCELLED" too).
Result<std::string> result_name(std::string name) {
  for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (name == "CANCELLED") name = "CANCELED";
  constexpr std::array<std::string_view, 5> kResults{"COMPLETED", "FAILED", "CANCELED", "TIMEOUT", "OUT_OF_MEMORY"};
  if (std::find(kResults.begin(), kResults.end(), name) == kResults.end())
    return invalid(
        fmt::format("history: unknown result \"{}\" (use COMPLETED, FAILED, "
                    "CANCELED, TIMEOUT or OUT_OF_MEMORY)",
                    name));
  return name;
}

}  // namespace

void Controller::store_steps(const std::string& agent_id,
                             const google::protobuf::RepeatedPtrField<v1::StepInfo>& steps) {
  if (steps.empty()) return;
  v1::ControllerMessage ack;
  for (const auto& s : steps) {
    // A record that cannot be stored is acknowledged anyway: resending it would not help.
    if (s.jobid() == 0 || !job::parse_step_name(s.step()))
      spdlog::warn("agent {}: dropping a step record with job {} step \"{}\"", agent_id, s.jobid(), s.step());
    else
      store_->put_step(to_record(s));
    auto* ref = ack.add_steps_stored();
    ref->set_jobid(s.jobid());
    ref->set_step(s.step());
  }
  auto it = links_.find(agent_id);
  if (it == links_.end()) return;  // the agent sends them again when it registers
  // The agent keeps the records until this comes: it need not hurry a commit.
  outbox_.push([link = it->second, ack = std::move(ack)] { link->send(ack); }, Outbox::Urgency::soon);
}

// Called with mu_ held. The step manager (in the agent of the job's first node) does the
// signalling; the controller checks who asks.
void Controller::cancel_steps(const Caller& c, const v1::CancelRequest& req, v1::CancelReply* rep) {
  for (const auto& ref : req.steps()) {
    auto* r = rep->add_results();
    r->set_jobid(ref.jobid());
    auto step = job::parse_step_name(ref.step());
    if (!step) {
      r->set_error(step.message());
      continue;
    }
    auto it = jobs_.find(ref.jobid());
    if (it == jobs_.end()) {
      r->set_error(inactive_result(ref.jobid()) ? fmt::format("job {} is not running", ref.jobid())
                                                : fmt::format("job {} not found", ref.jobid()));
      continue;
    }
    const JobRecord& job = *it->second;
    if (!is_admin(c) && job.userid != c.uid) {
      r->set_error(fmt::format("permission denied: job {} belongs to {}", job.id, username(job.userid)));
      continue;
    }
    if (job.state() != JobState::RUN || !job.status.started || !job.R) {
      r->set_error(fmt::format("job {} is not running", job.id));
      continue;
    }
    v1::ControllerMessage msg;
    auto* cs = msg.add_cancel_step();
    cs->set_jobid(job.id);
    cs->set_step(job::step_name(*step));
    cs->set_signal(req.signal());
    cs->set_userid(c.uid);
    cs->set_kill_grace(cfg_.kill_grace);
    send_to_node(job.R->nodes.front().name, msg);
    r->set_ok(true);
  }
}

Status Controller::list_steps(const Caller& c, const v1::ListStepsRequest& req, v1::ListStepsReply* rep) {
  // One job's steps are anyone's to list (like the queue); all steps only the caller's.
  std::optional<uint32_t> only_user;
  if (req.jobid() == 0 && !is_admin(c)) only_user = c.uid;
  (void)store_->flush();  // readers see only committed writes
  auto steps = store_->read_steps(req.jobid(), only_user);
  if (!steps) return steps.error();
  if (req.jobid() != 0 && steps->empty()) {
    bool known;
    {
      MutexLock lk(mu_);
      known = jobs_.count(req.jobid()) > 0;
    }
    if (!known && !store_->read_jobspec(req.jobid()))
      return Error{Errc::not_found, fmt::format("job {} not found", req.jobid())};
  }
  rep->mutable_steps()->Reserve(static_cast<int>(steps->size()));
  const Viewer v = viewer(c);
  for (const auto& s : *steps) {
    if (!v.sees_job(s.userid)) continue;
    auto* info = rep->add_steps();
    to_proto(s, info);
    if (!v.sees_details(s.userid)) redact(*info);
  }
  return {};
}

Status Controller::history(const Caller& c, const v1::HistoryRequest& req, v1::HistoryReply* rep) {
  if (req.since() < 0 || req.until() < 0) return Error{Errc::invalid_argument, "history: times must not be negative"};
  store::HistoryQuery q;
  q.userids.assign(req.userids().begin(), req.userids().end());
  q.jobids.assign(req.jobids().begin(), req.jobids().end());
  q.since = req.since();
  q.until = req.until();
  q.max = req.max_entries();
  for (const auto& r : req.results()) {
    auto name = result_name(r);
    if (!name) return name.error();
    q.results.push_back(std::move(*name));
  }
  (void)store_->flush();
  auto entries = store_->history(q);
  if (!entries) return entries.error();
  rep->mutable_jobs()->Reserve(static_cast<int>(entries->size()));
  const Viewer v = viewer(c);
  for (const auto& e : *entries) {
    v1::HistoryJob hj;
    const bool readable = summary_from_json(e.summary, hj.mutable_job());
    if (!readable) hj.mutable_job()->set_id(e.jobid);
    const uint32_t owner = readable ? hj.job().userid() : UINT32_MAX;
    if (!v.sees_job(owner)) continue;
    hj.mutable_steps()->Reserve(static_cast<int>(e.steps.size()));
    for (const auto& s : e.steps) to_proto(s, hj.add_steps());
    if (!v.sees_details(owner)) {
      redact(*hj.mutable_job());
      for (auto& s : *hj.mutable_steps()) redact(s);
    }
    *rep->add_jobs() = std::move(hj);
  }
  return {};
}

}  // namespace corral::ctld
