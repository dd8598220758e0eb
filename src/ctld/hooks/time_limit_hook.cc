#include "ctld/hooks/time_limit_hook.h"

#include "util/units.h"

namespace corral::ctld {

void TimeLimitHook::arm(HookContext& ctx, const JobView& job, double started) {
  if (job.spec->duration <= 0) return;
  uint64_t id = job.id;
  double limit = job.spec->duration;
  ctx.at(started + limit, [&ctx, id, limit] {
    const JobView* j = ctx.find_job(id);
    if (!j || j->state() != job::JobState::RUN || j->status.fatal_exception) return;
    ctx.raise_exception(id, "timeout", 0, "job exceeded its time limit of " + format_duration(limit));
  });
}

void TimeLimitHook::on_event(HookContext& ctx, const JobView& job, const job::Event& ev) {
  if (ev.name == "start") arm(ctx, job, ev.timestamp);
}

void TimeLimitHook::on_restart(HookContext& ctx, const JobView& job) {
  if (job.state() != job::JobState::RUN) return;
  for (const auto& ev : job.events)
    if (ev.name == "start") arm(ctx, job, ev.timestamp);
}

}  // namespace corral::ctld
