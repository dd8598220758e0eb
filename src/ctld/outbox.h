// Side effects that must wait until the events behind them are durable: replies to
// watchers, commands to node agents. Actions are pushed under the controller lock and
// released in order by the store's commit callback, so nobody outside ever sees state
// that a crash could take back.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "store/store.h"
#include "util/thread_annotations.h"

namespace corral::ctld {

class Outbox {
 public:
  // `soon`: nobody waits for this action (a watcher-less event, bookkeeping), so it need
  // not hurry the commit: actions sealed with only such ones run at the next commit that
  // someone waits for, or within the store's commit interval.
  enum class Urgency { now, soon };

  explicit Outbox(store::Store& store) : store_(store) {}
  void push(std::function<void()> action, Urgency urgency = Urgency::now);
  // Ties everything pushed so far to the writes queued so far: it runs once they commit.
  void seal();

 private:
  void release(uint64_t upto);

  store::Store& store_;
  Mutex mu_;
  std::deque<std::pair<uint64_t, std::function<void()>>> pending_ CORRAL_GUARDED_BY(mu_);
  uint64_t gen_ CORRAL_GUARDED_BY(mu_) = 1;  // generation of actions being pushed now
  bool unsealed_ CORRAL_GUARDED_BY(mu_) = false;
  bool urgent_ CORRAL_GUARDED_BY(mu_) = false;  // an unsealed action is Urgency::now
};

}  // namespace corral::ctld
