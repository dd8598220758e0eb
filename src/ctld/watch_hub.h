// Server-side filtered event streams: each Watch call is a Subscriber with its own
// filter and queue; the hub hands it the events and output it asked for.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client.pb.h"
#include "common.pb.h"
#include "ctld/privacy.h"
#include "job/eventlog.h"
#include "util/thread_annotations.h"

namespace corral::ctld {

v1::JobEvent to_proto(uint64_t jobid, const job::Event& ev);

struct WatchFilter {
  std::set<uint64_t> jobids;    // empty: all jobs
  std::set<std::string> names;  // empty: all events
  bool output = false;
  bool until_inactive = false;
  Viewer viewer;  // whose eyes: other users' event details and output are withheld
  // Items queued for a client that does not read; past it the watch ends (overflowed()).
  size_t max_queued = 1 << 20;
};

class Subscriber {
 public:
  explicit Subscriber(WatchFilter f);
  // Delivery side (hub).
  // `owner`: the uid of the job the item belongs to.
  void offer_event(const v1::JobEvent& ev, uint32_t owner);
  void offer_output(const v1::TaskOutput& out, uint32_t owner);
  void mark_inactive(uint64_t jobid);  // a watched job was already inactive
  void close();                        // the controller is going away
  // Stream side: waits up to `timeout_ms` and moves what is queued into `reply`.
  // Returns false once the subscription is over and nothing is left.
  bool next(v1::WatchReply& reply, int timeout_ms);
  // The client read too slowly: the watch was ended rather than queue without bound.
  bool overflowed();

 private:
  void finish_job_locked(uint64_t jobid) CORRAL_REQUIRES(mu_);
  void queue_locked(v1::WatchItem item) CORRAL_REQUIRES(mu_);

  Mutex mu_;
  WatchFilter filter_;  // fixed at construction
  std::set<uint64_t> remaining_ CORRAL_GUARDED_BY(mu_);
  std::condition_variable cv_;
  std::deque<v1::WatchItem> queue_ CORRAL_GUARDED_BY(mu_);
  bool done_ CORRAL_GUARDED_BY(mu_) = false;
  bool overflowed_ CORRAL_GUARDED_BY(mu_) = false;
};

class WatchHub {
 public:
  void add(std::shared_ptr<Subscriber> s);
  // Nobody watches: what is published now reaches no one (so it need not hurry a commit).
  bool idle();
  void publish_event(const v1::JobEvent& ev, uint32_t owner);
  void publish_output(const v1::TaskOutput& out, uint32_t owner);
  void close_all();

 private:
  Mutex mu_;
  std::vector<std::weak_ptr<Subscriber>> subs_ CORRAL_GUARDED_BY(mu_);
};

}  // namespace corral::ctld
