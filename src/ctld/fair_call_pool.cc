#include "ctld/fair_call_pool.h"

#include <utility>

namespace corral::ctld {

FairCallPool::FairCallPool(size_t threads) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

FairCallPool::~FairCallPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void FairCallPool::run(uint32_t uid, std::function<void()> call) {
  {
    std::lock_guard lock(mu_);
    auto& q = queued_[uid];
    if (q.empty()) turn_.push_back(uid);
    q.push_back(std::move(call));
  }
  ready_.notify_one();
}

void FairCallPool::work() {
  for (;;) {
    std::function<void()> call;
    uint32_t uid = 0;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !turn_.empty(); });
      if (stopping_) return;
      // The first user in turn with the fewest calls running: a user whose calls hold
      // threads already waits while anybody else has one queued.
      auto next = turn_.begin();
      for (auto it = turn_.begin(); it != turn_.end(); ++it)
        if (running_[*it] < running_[*next]) next = it;
      uid = *next;
      turn_.erase(next);
      auto q = queued_.find(uid);
      call = std::move(q->second.front());
      q->second.pop_front();
      if (q->second.empty())
        queued_.erase(q);
      else
        turn_.push_back(uid);  // the user's next call waits for everybody else's turn
      ++running_[uid];
    }
    call();
    std::lock_guard lock(mu_);
    if (--running_[uid] == 0) running_.erase(uid);
  }
}

}  // namespace corral::ctld
