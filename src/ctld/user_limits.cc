#include "ctld/user_limits.h"

#include <algorithm>

#include <fmt/format.h>

#include "ctld/config.h"

namespace corral::ctld {

Status UserLimits::admit(uint32_t uid, uint64_t count, double now) {
  if (cfg_.max_submit_jobs > 0 && active(uid) + count > cfg_.max_submit_jobs)
    return Error{Errc::resource_exhausted,
                 fmt::format("job limit reached: uid {} has {} unfinished job(s), {} more would pass the "
                             "limit of {} (limits.max-submit-jobs)",
                             uid, active(uid), count, cfg_.max_submit_jobs)};
  if (cfg_.submit_rate <= 0) return {};
  Bucket& b = buckets_[uid];
  const double burst = std::max(1u, cfg_.submit_burst);
  b.tokens = b.at < 0 ? burst : std::min(burst, b.tokens + (now - b.at) * cfg_.submit_rate);
  b.at = now;
  if (b.tokens < 1)
    return Error{Errc::resource_exhausted,
                 fmt::format("submission rate limit: uid {} may submit {:g} times per second (limits.submit-rate); "
                             "try again in {:.1f} s",
                             uid, cfg_.submit_rate, (1 - b.tokens) / cfg_.submit_rate)};
  b.tokens -= 1;
  return {};
}

void UserLimits::job_removed(uint32_t uid) {
  auto it = active_.find(uid);
  if (it == active_.end()) return;
  if (--it->second == 0) active_.erase(it);
}

bool UserLimits::may_run(uint32_t uid) const {
  if (cfg_.max_running_jobs == 0) return true;
  auto it = running_.find(uid);
  return it == running_.end() || it->second < cfg_.max_running_jobs;
}

void UserLimits::run_removed(uint32_t uid) {
  auto it = running_.find(uid);
  if (it == running_.end()) return;
  if (--it->second == 0) running_.erase(it);
}

uint64_t UserLimits::active(uint32_t uid) const {
  auto it = active_.find(uid);
  return it == active_.end() ? 0 : it->second;
}

}  // namespace corral::ctld
