#include "ctld/hooks/dependency_hook.h"

#include <fmt/format.h>

namespace corral::ctld {

namespace {

// Whether `scheme` is satisfied by a target that reached INACTIVE with `result`.
bool satisfied_at_end(const std::string& scheme, const std::string& result, bool started) {
  if (scheme == "afterany") return true;
  if (scheme == "afterok") return result == "COMPLETED";
  if (scheme == "afternotok") return result != "COMPLETED";
  if (scheme == "after") return started;
  return false;
}

}  // namespace

std::unique_ptr<JobHook> make_dependency_hook() { return std::make_unique<DependencyHook>(); }

Status DependencyHook::validate(HookContext& ctx, const job::Jobspec& spec, uint32_t) {
  for (const auto& uri : spec.dependencies) {
    auto dep = job::parse_dependency_uri(uri);
    if (!dep) return invalid("dependency " + uri + ": " + dep.message());
    if (dep->scheme == "singleton") return invalid("dependency singleton is not supported yet; use afterany:JOBID");
    if (dep->scheme == "begin-time") continue;
    if (!ctx.find_job(dep->jobid) && !ctx.inactive_result(dep->jobid))
      return invalid(fmt::format("dependency {}: job {} does not exist", uri, dep->jobid));
  }
  return {};
}

void DependencyHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "validate") {
    for (const auto& uri : job.spec->dependencies)
      if (auto dep = job::parse_dependency_uri(uri)) arm(ctx, job.id, *dep, true);
    // --begin is a begin-time dependency too.
    if (job.spec->begin_time > 0) {
      job::Dependency begin;
      begin.scheme = "begin-time";
      begin.time = job.spec->begin_time;
      arm(ctx, job.id, begin, true);
    }
    return;
  }
  if (ev.name == "start" || ev.name == "clean") target_changed(ctx, job.id, &job, ev.name);
}

void DependencyHook::on_restart(HookContext& ctx, const JobView& job) {
  if (job.state() != job::JobState::DEPEND) return;
  for (const auto& desc : job.status.dependencies)
    if (auto dep = job::parse_dependency_uri(desc)) arm(ctx, job.id, *dep, false);
}

// Registers the wait; `add` posts dependency-add (not on restart, where it is in the log).
void DependencyHook::arm(HookContext& ctx, uint64_t jobid, const job::Dependency& dep, bool add) {
  const std::string desc = dep.uri();
  if (dep.scheme == "singleton") return;  // accepted, nothing to wait for yet
  if (dep.scheme == "begin-time") {
    if (dep.time <= ctx.now()) return;
    if (add) ctx.add_dependency(jobid, desc);
    ctx.at(dep.time, [&ctx, jobid, desc] {
      if (auto* j = ctx.find_job(jobid); j && j->status.dependencies.count(desc)) ctx.remove_dependency(jobid, desc);
    });
    return;
  }
  if (add) ctx.add_dependency(jobid, desc);
  Waiter w{jobid, dep};
  if (const JobView* target = ctx.find_job(dep.jobid)) {
    if (dep.scheme == "after" && target->status.started) {
      resolve(ctx, w, true, "");
      return;
    }
    waiting_[dep.jobid].push_back(w);
    return;
  }
  auto result = ctx.inactive_result(dep.jobid);
  std::string r = result ? *result : "FAILED";
  resolve(ctx, w, satisfied_at_end(dep.scheme, r, r != "CANCELED"), fmt::format("job {} ended {}", dep.jobid, r));
}

void DependencyHook::target_changed(HookContext& ctx, uint64_t target, const JobView* rec, const std::string& event) {
  auto it = waiting_.find(target);
  if (it == waiting_.end()) return;
  std::vector<Waiter> keep, done;
  for (auto& w : it->second) {
    if (event == "start" && w.dep.scheme != "after")
      keep.push_back(w);
    else
      done.push_back(w);
  }
  if (keep.empty())
    waiting_.erase(it);
  else
    it->second = std::move(keep);
  std::string result = rec ? job::job_result(rec->status) : "FAILED";
  for (const auto& w : done) {
    bool ok = event == "start" || satisfied_at_end(w.dep.scheme, result, rec->status.started);
    resolve(ctx, w, ok, fmt::format("job {} ended {}", target, result));
  }
}

void DependencyHook::resolve(HookContext& ctx, const Waiter& w, bool satisfied, const std::string& why) {
  const JobView* j = ctx.find_job(w.jobid);
  if (!j || j->state() != job::JobState::DEPEND) return;
  if (satisfied) {
    ctx.remove_dependency(w.jobid, w.dep.uri());
    return;
  }
  ctx.raise_exception(w.jobid, "dependency", 0,
                      fmt::format("dependency {} can never be satisfied: {}", w.dep.uri(), why));
}

}  // namespace corral::ctld
