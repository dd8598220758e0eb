// Per-user admission limits: how many unfinished jobs a user may have (Slurm's
// MaxSubmitJobs) and how fast one user may submit (a token bucket, like slurmctld's
// rl_enable), so one user flooding the controller cannot slow everyone else.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "util/result.h"

namespace corral::ctld {

struct LimitsConfig;

class UserLimits {
 public:
  explicit UserLimits(const LimitsConfig& cfg) : cfg_(cfg) {}

  // Whether `uid` may add `count` jobs now (`now` in seconds); takes a token when yes.
  Status admit(uint32_t uid, uint64_t count, double now);
  void job_added(uint32_t uid) { ++active_[uid]; }
  void jobs_added(uint32_t uid, uint64_t n) { active_[uid] += n; }
  void job_removed(uint32_t uid);
  uint64_t active(uint32_t uid) const;

  // Slurm's MaxJobs: how many of a user's jobs may be queued in the scheduler or hold
  // resources at once. A job beyond it waits outside the scheduler (AssocMaxJobsLimit).
  bool may_run(uint32_t uid) const;
  void run_added(uint32_t uid) { ++running_[uid]; }
  void run_removed(uint32_t uid);

 private:
  struct Bucket {
    double tokens = 0;
    double at = -1;
  };
  const LimitsConfig& cfg_;
  std::unordered_map<uint32_t, uint64_t> active_;
  std::unordered_map<uint32_t, uint64_t> running_;
  std::unordered_map<uint32_t, Bucket> buckets_;
};

}  // namespace corral::ctld
