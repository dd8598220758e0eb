// Client requests other than submit and listings: cancel and signal, one job's details,
// watch subscriptions, ping and shutdown.
#include <signal.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"
#include "ctld/job_summary.h"

namespace corral::ctld {

using job::JobState;

namespace {

v1::TaskOutput to_proto(uint64_t jobid, const OutputChunk& c) {
  v1::TaskOutput o;
  o.set_jobid(jobid);
  o.set_rank(c.rank);
  o.set_stderr(c.is_stderr);
  o.set_eof(c.eof);
  o.set_node(c.node);
  o.set_data(c.data);
  return o;
}

// Another user's job under private-data = jobs.
Status hidden_job(uint64_t id) {
  return Error{Errc::permission_denied, fmt::format("job {} belongs to another user (private-data = jobs)", id)};
}

}  // namespace

Status Controller::cancel(const Caller& c, const v1::CancelRequest& req, v1::CancelReply* rep) {
  if (req.signal() < 0 || req.signal() >= 65)
    return Error{Errc::invalid_argument, fmt::format("invalid signal {}", req.signal())};
  auto mask = listing_state_mask(req.states());
  if (!mask) return mask.error();
  {
    MutexLock lk(mu_);
    cancel_steps(c, req, rep);
    std::vector<uint64_t> ids(req.jobids().begin(), req.jobids().end());
    if (ids.empty() && req.steps_size() == 0) {
      if (!req.has_userid() && req.states().empty())
        return Error{Errc::invalid_argument, "cancel: give job ids, a user or states"};
      for (const auto& [id, job] : jobs_)
        if ((!req.has_userid() || job->userid == req.userid()) && (static_cast<uint32_t>(job->state()) & *mask))
          ids.push_back(id);
      std::sort(ids.begin(), ids.end());
    }
    for (uint64_t id : ids) {
      auto* r = rep->add_results();
      r->set_jobid(id);
      auto it = jobs_.find(id);
      if (it == jobs_.end()) {
        r->set_error(inactive_result(id) ? "job has already finished" : "no such job");
        continue;
      }
      JobRecord& job = *it->second;
      if (!is_admin(c) && job.userid != c.uid) {
        r->set_error(fmt::format("permission denied: job {} belongs to {}", id, username(job.userid)));
        continue;
      }
      if (req.signal() != 0) {
        if (job.state() != JobState::RUN || !job.status.started) {
          r->set_error("job is not running");
          continue;
        }
        for (const auto& [node, n] : job.exec_tasks) {
          if (job.exited.count(node)) continue;
          v1::ControllerMessage msg;
          auto* s = msg.add_signal();
          s->set_jobid(id);
          s->set_signal(req.signal());
          s->set_attempt(job.status.requeues);
          send_to_node(node, msg);
        }
        r->set_ok(true);
        continue;
      }
      if (job.state() == JobState::CLEANUP || job.status.fatal_exception) {
        r->set_error("job is already finishing");
        continue;
      }
      raise_exception(id, "cancel", 0, req.message().empty() ? "cancelled by " + username(c.uid) : req.message());
      r->set_ok(true);
    }
    drain_posts();
    outbox_.seal();
  }
  if (auto st = wait_durable(*store_, true); !st.ok()) {
    if (st.error().code != Errc::unavailable) return Error{Errc::internal, st.message()};
    // Held, not lost: the kill goes out when the cancel is saved.
    return Error{Errc::unavailable,
                 "the cancel is recorded and takes effect once corrald can write its "
                 "state again: " +
                     st.message()};
  }
  return {};
}

Status Controller::get_job(const Caller& c, const v1::GetJobRequest& req, v1::JobInfo* rep) {
  auto st = get_job_unfiltered(req, rep);
  if (!st.ok()) return st;
  const Viewer v = viewer(c);
  if (!v.sees_job(rep->userid())) {
    rep->Clear();
    return hidden_job(req.jobid());
  }
  if (!v.sees_details(rep->userid())) redact(*rep);
  return {};
}

bool Controller::retired_summary(uint64_t id, v1::JobInfo* out) {
  std::lock_guard lk(retired_mu_);
  auto it = retired_unsaved_.find(id);
  if (it == retired_unsaved_.end()) return false;
  *out = it->second;
  return true;
}

Status Controller::get_job_unfiltered(const v1::GetJobRequest& req, v1::JobInfo* rep) {
  {
    MutexLock lk(mu_);
    auto it = jobs_.find(req.jobid());
    if (it != jobs_.end()) {
      const JobRecord& job = *it->second;
      fill_info(job, rep);
      rep->set_jobspec(*job.jobspec_text);
      if (job.R) rep->set_r(job::to_json(*job.R));
      std::map<std::string, std::string> said;
      for (const auto& h : hooks_) h->describe_job(job, said);
      for (auto& [k, v] : said) (*rep->mutable_hook_info())[k] = std::move(v);
      if (req.with_eventlog())
        for (const auto& ev : job.events) rep->add_eventlog(job::encode_event(ev));
      return {};
    }
  }
  (void)store_->flush();  // readers see only committed writes
  auto sum = store_->inactive_summary(req.jobid());
  if (!sum) {
    // Retired while the state database cannot be written: what memory has (no eventlog).
    if (retired_summary(req.jobid(), rep)) return {};
    return Error{Errc::not_found, fmt::format("job {} not found", req.jobid())};
  }
  if (!summary_from_json(*sum, rep)) return Error{Errc::internal, "stored job summary is unreadable"};
  if (auto spec = store_->read_jobspec(req.jobid())) rep->set_jobspec(*spec);
  auto events = store_->read_eventlog(req.jobid());
  if (events) {
    for (const auto& ev : *events) {
      if (req.with_eventlog()) rep->add_eventlog(job::encode_event(ev));
      if (ev.name == "alloc") {
        auto ctx = nlohmann::json::parse(ev.context, nullptr, false);
        if (ctx.is_object() && ctx.contains("R")) rep->set_r(ctx["R"].dump());
      }
    }
  }
  return {};
}

Status Controller::subscribe(const Caller& c, const v1::WatchRequest& req, std::shared_ptr<Subscriber>* out) {
  if (req.jobids_size() > kMaxWatchedJobs)
    return Error{Errc::invalid_argument,
                 fmt::format("watch: {} job ids asked for, at most {} at once", req.jobids_size(), kMaxWatchedJobs)};
  WatchFilter f;
  f.viewer = viewer(c);
  f.jobids.insert(req.jobids().begin(), req.jobids().end());
  f.names.insert(req.events().begin(), req.events().end());
  f.output = req.output();
  f.until_inactive = req.until_inactive() && !f.jobids.empty();
  auto sub = std::make_shared<Subscriber>(f);
  std::vector<v1::WatchItem> history;
  std::vector<uint64_t> inactive;
  MutexLock lk(mu_);
  // The store's readers see only committed writes; a watched job may have just finished.
  bool any_finished = false;
  for (uint64_t id : f.jobids) any_finished |= !jobs_.count(id);
  if (any_finished) (void)store_->flush();
  std::vector<uint32_t> owners;  // of each history item
  auto add_event = [&](uint64_t id, const job::Event& ev, uint32_t owner) {
    *history.emplace_back().mutable_event() = to_proto(id, ev);
    owners.push_back(owner);
  };
  auto add_output = [&](uint64_t id, const OutputChunk& chunk, uint32_t owner) {
    *history.emplace_back().mutable_output() = to_proto(id, chunk);
    owners.push_back(owner);
  };
  for (uint64_t id : f.jobids) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      const uint32_t owner = it->second->userid;
      if (!f.viewer.sees_job(owner)) return hidden_job(id);
      if (!req.history()) continue;
      for (const auto& ev : it->second->events) add_event(id, ev, owner);
      for (const auto& chunk : it->second->output) add_output(id, chunk, owner);
      continue;
    }
    auto events = store_->read_eventlog(id);
    if (!events || events->empty()) return Error{Errc::not_found, fmt::format("job {} not found", id)};
    const uint32_t owner = inactive_owner(id);
    if (!f.viewer.sees_job(owner)) return hidden_job(id);
    if (req.history()) {
      // Output first: the replayed `clean` ends an until_inactive subscription, and
      // output offered after it would be dropped.
      if (auto ro = recent_output_.find(id); ro != recent_output_.end())
        for (const auto& chunk : ro->second) add_output(id, chunk, owner);
      for (const auto& ev : *events) add_event(id, ev, owner);
    }
    inactive.push_back(id);
  }
  // Joining the hub in commit order means the subscriber sees each event exactly once.
  outbox_.push([this, sub, history = std::move(history), owners = std::move(owners), inactive = std::move(inactive)] {
    for (size_t i = 0; i < history.size(); ++i) {
      if (history[i].has_event())
        sub->offer_event(history[i].event(), owners[i]);
      else
        sub->offer_output(history[i].output(), owners[i]);
    }
    for (uint64_t id : inactive) sub->mark_inactive(id);
    hub_.add(sub);
  });
  outbox_.seal();
  *out = sub;
  return {};
}

uint32_t Controller::inactive_owner(uint64_t jobid) {
  v1::JobInfo info;
  auto sum = store_->inactive_summary(jobid);
  // Unreadable: nobody's but the administrators'.
  if (!sum || !summary_from_json(*sum, &info)) return UINT32_MAX;
  return info.userid();
}

Status Controller::ping(const Caller& c, v1::PingReply* rep) {
  MutexLock lk(mu_);
  rep->set_version(CORRAL_VERSION);
  rep->set_uptime(now() - start_time_);
  rep->set_nodes_total(static_cast<uint32_t>(nodes_.size()));
  uint32_t up = 0;
  for (const auto& n : nodes_) up += n.link ? 1 : 0;
  rep->set_nodes_up(up);
  rep->set_owner_uid(owner_uid_);
  rep->set_your_uid(c.uid);
  return {};
}

Status Controller::shutdown(const Caller& c) {
  if (!is_admin(c)) return Error{Errc::permission_denied, "only root or the instance owner may stop corrald"};
  spdlog::info("shutdown requested by uid {}", c.uid);
  if (on_shutdown_) on_shutdown_();
  return {};
}

}  // namespace corral::ctld
