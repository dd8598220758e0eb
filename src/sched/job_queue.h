// Pending jobs in priority order: urgency (higher first), then submit order (lower first).
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>

#include "sched/scheduler.h"

namespace corral::sched {

enum class WaitReason { None, Priority, Resources, ReqNodeNotAvail, JobHeldUser, Switches };
std::string_view to_string(WaitReason reason);

inline constexpr unsigned kUrgencyHold = 0;
inline constexpr unsigned kUrgencyExpedite = 31;

struct QueuedJob {
  PendingJob job;
  WaitReason reason = WaitReason::None;
};

class JobQueue {
 public:
  struct Key {
    unsigned urgency = 0;
    uint64_t submit_order = 0;
    uint64_t jobid = 0;
    bool operator<(const Key& o) const;
  };
  using Map = std::map<Key, QueuedJob>;

  void push(const PendingJob& job);  // replaces a queued job with the same id
  void erase(uint64_t jobid);
  Map::iterator erase(Map::iterator it);
  void set_urgency(uint64_t jobid, unsigned urgency);
  const QueuedJob* find(uint64_t jobid) const;
  size_t size() const { return jobs_.size(); }
  Map::iterator begin() { return jobs_.begin(); }
  Map::iterator end() { return jobs_.end(); }

 private:
  Map jobs_;
  // Where each job sits in jobs_ (map iterators stay valid), so find() by id costs one
  // hash lookup: listings ask for the pending reason of every queued job.
  std::unordered_map<uint64_t, Map::iterator> keys_;
};

}  // namespace corral::sched
