// The infiniband hook's side of partition membership: after every node's prolog, the
// ports each job interface uses join its key through the subnet manager (UFM or OpenSM)
// before the job may start; when the job ends they leave it (a job's own key is removed),
// retried until the subnet manager answers, the key quarantined meanwhile. Calls start
// once the record behind them is durable, run in order on one worker thread and come back
// under the lock through the HookRunner.
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_hook.h"
#include "hook/perilog_text.h"

namespace corral::fabric::infiniband {

using hook::HookContext;
using hook::JobView;
using nlohmann::json;

namespace {

constexpr const char* kAction = "infiniband";
constexpr int kJoinAttempts = 3;
constexpr double kMaxLeaveRetry = 60;

}  // namespace

IbHook::~IbHook() { stop(); }

void IbHook::attach(hook::HookRunner& runner) {
  runner_ = &runner;
  if (!sm_) return;
  worker_ = std::make_unique<SerialWorker>();
  worker_->post([this] { spdlog::info("infiniband: partition keys are applied through {}", sm_->describe()); });
}

void IbHook::stop() {
  if (worker_) worker_->stop();
}

void IbHook::back(std::function<void(HookContext&)> fn) {
  if (runner_ && worker_ && !worker_->stopping()) runner_->run(std::move(fn));
}

void IbHook::join_members(HookContext& ctx, const JobView& job, Members members) {
  held_[job.id].members = members;
  // Recorded first: whatever part of it is applied is taken out again when the job ends.
  ctx.post_event(job.id, kJoinEvent, json{{"members", members_json(members)}}.dump());
  auto work = [this, jobid = job.id, members = std::move(members)] {
    Status st;
    for (int attempt = 1; attempt <= kJoinAttempts; ++attempt) {
      for (const auto& [pkey, guids] : members)
        if (st = sm_->join(pkey, {guids.begin(), guids.end()}); !st) break;
      if (st || st.error().code != Errc::unavailable || attempt == kJoinAttempts) break;
      if (worker_ && !worker_->pause(attempt)) return;
    }
    back([this, jobid, st](HookContext& c) { joined(c, jobid, st); });
  };
  if (!worker_) return ctx.raise_exception(job.id, kAction, 0, "the infiniband hook has no worker (not attached)");
  // Only once the event is durable: a crash in between must not leave ports in a key that
  // no record says to take them out of.
  ctx.after_durable([w = worker_.get(), work = std::move(work)]() mutable { w->post(std::move(work)); });
}

void IbHook::joined(HookContext& ctx, uint64_t jobid, const Status& st) {
  if (!st) {
    sm_error_ = st.message();
    spdlog::warn("infiniband: job {}: {}", jobid, st.message());
  }
  const JobView* job = ctx.find_job(jobid);
  if (!job || job->status.released || !job->status.prolog_actions.count(kAction)) return;
  std::vector<std::string> failures;
  if (!st) failures.push_back(fmt::format("Infiniband partition keys not applied: {}", st.message()));
  hook::finish_prolog(ctx, jobid, kAction, failures);
}

std::vector<IbHook::LeaveStep> IbHook::leave_plan(uint64_t jobid) const {
  std::vector<LeaveStep> plan;
  auto it = held_.find(jobid);
  if (it == held_.end()) return plan;
  std::set<uint16_t> named;
  for (const auto& [n, k] : named_) named.insert(k);
  for (const auto& [pkey, guids] : it->second.members) {
    LeaveStep step{pkey, {}, !named.contains(pkey)};
    // A port another running job still has in this (named) key stays in it: one pass
    // over the other jobs per key, not one per port.
    std::set<std::string> kept;
    if (!step.drop)
      for (const auto& [other, h] : held_)
        if (other != jobid && !h.released)
          if (auto m = h.members.find(pkey); m != h.members.end()) kept.insert(m->second.begin(), m->second.end());
    for (const auto& g : guids)
      if (!kept.contains(g)) step.guids.push_back(g);
    if (step.drop || !step.guids.empty()) plan.push_back(std::move(step));
  }
  return plan;
}

void IbHook::leave_members(HookContext& ctx, uint64_t jobid, double retry_in) {
  std::vector<LeaveStep> plan = leave_plan(jobid);
  if (!worker_) return;
  if (plan.empty()) return confirm(ctx, jobid, kSubnetManager);
  // After the join, in the worker's order; and after the release is durable, so a job a
  // restart finds still running has not lost its ports.
  ctx.after_durable([this, w = worker_.get(), jobid, retry_in, plan = std::move(plan)]() mutable {
    w->post([this, jobid, retry_in, plan = std::move(plan)] {
      Status st;
      for (const auto& step : plan)
        if (st = sm_->leave(step.pkey, step.guids, step.drop); !st) break;
      back([this, jobid, st, retry_in](HookContext& c) { left(c, jobid, st, retry_in); });
    });
  });
}

void IbHook::left(HookContext& ctx, uint64_t jobid, const Status& st, double retry_in) {
  if (st) {
    confirm(ctx, jobid, kSubnetManager);
    return;
  }
  // The job's key stays quarantined (no other job gets it) until the subnet manager agrees.
  sm_error_ = st.message();
  spdlog::warn("infiniband: job {}: taking its ports out of their partitions failed, again in {:.0f}s: {}", jobid,
               retry_in, st.message());
  const double next = std::min(retry_in * 2, kMaxLeaveRetry);
  ctx.at(ctx.now() + retry_in, [this, &ctx, jobid, next] {
    if (held_.contains(jobid)) leave_members(ctx, jobid, next);
  });
}

}  // namespace corral::fabric::infiniband
