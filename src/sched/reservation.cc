#include "sched/reservation.h"

#include <algorithm>

namespace corral::sched {
namespace {

// Running jobs in end-time order, lent back to the pool up to a point; undone on scope exit.
class LookAhead {
 public:
  LookAhead(ResourcePool& pool, std::vector<const ResourcePool::Running*> jobs) : pool_(pool), jobs_(std::move(jobs)) {}
  ~LookAhead() { advance_to(0); }
  LookAhead(const LookAhead&) = delete;
  LookAhead& operator=(const LookAhead&) = delete;

  // Moves to the point where the first `n` jobs have ended.
  void advance_to(size_t n) {
    while (lent_ < n) pool_.lend(*jobs_[lent_++]);
    while (lent_ > n) pool_.unlend(*jobs_[--lent_]);
  }

 private:
  ResourcePool& pool_;
  std::vector<const ResourcePool::Running*> jobs_;
  size_t lent_ = 0;
};

}  // namespace

std::optional<Reservation> find_reservation(const topology::Placer& placer, ResourcePool& pool,
                                            const topology::Request& req, double now) {
  std::vector<const ResourcePool::Running*> jobs;
  std::vector<double> group_time;  // distinct end times, ascending
  std::vector<size_t> group_end;   // jobs ended once group_time[g] is reached
  for (const auto& [time, jobid] : pool.by_end_time()) {
    jobs.push_back(&pool.running(jobid));
    if (group_time.empty() || group_time.back() != time) {
      group_time.push_back(time);
      group_end.push_back(0);
    }
    group_end.back() = jobs.size();
  }
  if (jobs.empty()) return std::nullopt;

  LookAhead ahead(pool, std::move(jobs));
  auto place_after = [&](size_t group) {
    ahead.advance_to(group_end[group]);
    return placer.place_indexed(req, pool.states(), pool.index());
  };
  // More ended jobs only free more, so whether it fits is monotone in time: binary search
  // for the first end time at which it does.
  size_t hi = group_time.size() - 1;
  auto best = place_after(hi);
  if (!best) return std::nullopt;
  size_t lo = 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (auto alloc = place_after(mid)) {
      hi = mid;
      best = std::move(alloc);
    } else {
      lo = mid + 1;
    }
  }
  Reservation resv;
  resv.start = std::max(now, group_time[hi]);
  for (const auto& share : best->shares) resv.nodes.push_back(share.node);
  return resv;
}

}  // namespace corral::sched
