// What hooks may do to a job: post events, raise exceptions, hold the job with
// dependencies and named prolog/epilog actions, add task environment, rewrite the jobspec,
// run commands on its nodes, drain nodes, set timers.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"

namespace corral::ctld {

using nlohmann::json;

double Controller::now() const { return job::now(); }

const JobView* Controller::find_job(uint64_t jobid) const {
  auto it = jobs_.find(jobid);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::optional<std::string> Controller::inactive_result(uint64_t jobid) const {
  (void)store_->flush();  // readers see only committed writes
  auto s = store_->inactive_summary(jobid);
  if (!s) return std::nullopt;
  auto j = json::parse(*s, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return j.value("result", std::string("FAILED"));
}

void Controller::post_event(uint64_t jobid, std::string name, std::string context_json) {
  post(jobid, job::make_event(std::move(name), std::move(context_json)));
}

void Controller::raise_exception(uint64_t jobid, std::string type, int severity, std::string note) {
  json ctx{{"type", type}, {"severity", severity}, {"note", note}, {"userid", owner_uid_}};
  spdlog::info("job {}: exception {} (severity {}): {}", jobid, type, severity, note);
  post(jobid, job::make_event("exception", ctx.dump()));
}

void Controller::add_dependency(uint64_t jobid, std::string description) {
  post(jobid, job::make_event("dependency-add", json{{"description", description}}.dump()));
}

void Controller::remove_dependency(uint64_t jobid, std::string description) {
  post(jobid, job::make_event("dependency-remove", json{{"description", description}}.dump()));
}

void Controller::prolog_start(uint64_t jobid, std::string description) {
  post(jobid, job::make_event("prolog-start", json{{"description", description}}.dump()));
}

void Controller::prolog_finish(uint64_t jobid, std::string description, int status) {
  post(jobid, job::make_event("prolog-finish", json{{"description", description}, {"status", status}}.dump()));
}

void Controller::epilog_start(uint64_t jobid, std::string description) {
  post(jobid, job::make_event("epilog-start", json{{"description", description}}.dump()));
}

void Controller::epilog_finish(uint64_t jobid, std::string description, int status) {
  post(jobid, job::make_event("epilog-finish", json{{"description", description}, {"status", status}}.dump()));
}

void Controller::set_task_env(uint64_t jobid, std::string key, std::string value) {
  auto it = jobs_.find(jobid);
  if (it != jobs_.end()) it->second->extra_env[std::move(key)] = std::move(value);
}

void Controller::job_note(uint64_t jobid, std::string text) {
  auto it = jobs_.find(jobid);
  if (it != jobs_.end()) it->second->notes.push_back(std::move(text));
}

Status Controller::rewrite_jobspec(uint64_t jobid, const std::string& jobspec_json) {
  auto it = jobs_.find(jobid);
  if (it == jobs_.end()) return not_found("no such active job");
  JobRecord& job = *it->second;
  if (job.state() >= job::JobState::RUN) return invalid("the jobspec can only change before the job is allocated");
  auto spec = job::parse_jobspec(jobspec_json);
  if (!spec) return spec.error();
  job.jobspec_text = std::make_shared<const std::string>(job::jobspec_to_string(*spec));
  job.spec = std::make_shared<const job::Jobspec>(std::move(*spec));
  // The new jobspec is part of the eventlog, so a replay sees the same request.
  post(jobid, job::make_event("jobspec-update", json{{"jobspec", json::parse(*job.jobspec_text)}}.dump()));
  if (job.in_scheduler) {
    sched_.dequeue(jobid);
    job.in_scheduler = false;
    touch(job);
  }
  return {};
}

void Controller::run_on_nodes(uint64_t jobid, const std::string& kind, const std::string& command, double timeout,
                              const std::vector<std::string>& nodes, const std::map<std::string, std::string>& env) {
  auto& pending = perilogs_[{jobid, kind}];
  for (const auto& n : nodes) {
    pending.insert(n);
    v1::ControllerMessage msg;
    auto* p = msg.add_perilog();
    p->set_jobid(jobid);
    p->set_kind(kind);
    p->set_command(command);
    p->set_timeout(timeout);
    p->add_nodes(n);
    for (const auto& [k, v] : env) (*p->mutable_env())[k] = v;
    send_to_node(n, msg);
  }
}

void Controller::deliver_perilog(uint64_t jobid, const PerilogOutcome& o) {
  auto jt = jobs_.find(jobid);
  for (auto& h : hooks_) {
    if (jt != jobs_.end())
      h->on_perilog(*this, *jt->second, o);
    else
      h->on_perilog_inactive(*this, jobid, o);
  }
}

bool Controller::node_exists(const std::string& node) const { return nodes_.find(node) != nullptr; }

bool Controller::node_drained(const std::string& node) const {
  const NodeEntry* n = nodes_.find(node);
  return n != nullptr && n->drained;
}

void Controller::save_state(std::string_view hook, const std::string& key, const std::string& value) {
  store_->put_hook_state(std::string(hook), key, value);
}

void Controller::erase_state(std::string_view hook, const std::string& key) {
  store_->erase_hook_state(std::string(hook), key);
}

// Hook "*": every hook that answers `q` (one that has no such query is left out), as
// {"hook name": answer}; `corral nodes --capabilities` asks this way, naming no hook.
Status Controller::hook_query_all(const HookQuery& q, v1::HookQueryReply* rep) {
  json all = json::object();
  for (auto& h : hooks_) {
    auto r = h->query(*this, q);
    if (!r) {
      if (r.error().code == Errc::not_found) continue;
      return r.error();
    }
    auto j = json::parse(*r, nullptr, false);
    if (!j.is_discarded()) all[std::string(h->name())] = std::move(j);
  }
  drain_posts();
  outbox_.seal();
  rep->set_json(all.dump());
  return {};
}

Status Controller::hook_query(const Caller& c, const v1::HookQueryRequest& req, v1::HookQueryReply* rep) {
  HookQuery q{req.what(), req.args_json().empty() ? "{}" : req.args_json(), c.uid, is_admin(c)};
  if (!json::accept(q.args_json)) return Error{Errc::invalid_argument, "hook query: the arguments are not valid JSON"};
  MutexLock lk(mu_);
  if (req.hook() == "*") return hook_query_all(q, rep);
  for (auto& h : hooks_) {
    if (h->name() != req.hook()) continue;
    auto r = h->query(*this, q);
    drain_posts();
    outbox_.seal();
    if (!r) return r.error();
    rep->set_json(std::move(*r));
    return {};
  }
  return Error{Errc::not_found,
               fmt::format("no hook '{}' is loaded in corrald (is it enabled in the configuration?)", req.hook())};
}

void Controller::Runner::run(std::function<void(HookContext&)> fn) {
  MutexLock lk(c_.mu_);
  if (c_.stopping_) return;
  fn(c_);
  c_.drain_posts();
  c_.outbox_.seal();
}

// Urgent: the outside world waits for it, so it does not linger for a commit interval.
void Controller::after_durable(std::function<void()> fn) { outbox_.push(std::move(fn), Outbox::Urgency::now); }

void Controller::at(double when, std::function<void()> fn) {
  timers_.push(Timer{when, timer_seq_++, std::move(fn)});
  cv_.notify_one();
}

}  // namespace corral::ctld
