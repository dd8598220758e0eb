#include "util/fork_join.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace corral {

struct ForkJoin::Shared {
  std::mutex mu;
  std::condition_variable work, done;
  bool stop = false;
  uint64_t batch = 0;                               // under mu: changes when a batch starts
  const std::function<void(size_t)>* fn = nullptr;  // under mu: the running batch's
  size_t n = 0;                                     // under mu: 0 once the batch is over
  size_t busy = 0;                                  // under mu: helpers inside a batch
  std::atomic<size_t> next{0};                      // the next index to take
  std::vector<std::thread> threads;                 // the caller's only

  void start(unsigned helpers);
  void helper();
};

ForkJoin::ForkJoin(unsigned helpers) : helpers_(helpers), shared_(std::make_unique<Shared>()) {}

ForkJoin::~ForkJoin() {
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->work.notify_all();
  for (auto& t : shared_->threads) t.join();
}

void ForkJoin::Shared::start(unsigned helpers) {
  threads.reserve(helpers);
  for (unsigned i = 0; i < helpers; ++i) threads.emplace_back([this] { helper(); });
}

// A helper that wakes late, after its batch is over, reads n == 0 and takes nothing: it
// never calls a function whose batch has returned, nor moves the index, which the next
// batch may already have reset.
void ForkJoin::Shared::helper() {
  uint64_t seen = 0;
  std::unique_lock lock(mu);
  for (;;) {
    work.wait(lock, [&] { return stop || batch != seen; });
    if (stop) return;
    seen = batch;
    const auto* f = fn;
    const size_t count = n;
    ++busy;
    lock.unlock();
    if (count > 0)
      for (size_t i; (i = next.fetch_add(1)) < count;) (*f)(i);
    lock.lock();
    if (--busy == 0) done.notify_one();
  }
}

void ForkJoin::run(size_t n, const std::function<void(size_t)>& fn) {
  if (helpers_ == 0 || n < 2) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Shared& s = *shared_;
  if (s.threads.empty()) s.start(helpers_);
  {
    std::lock_guard lock(s.mu);
    s.fn = &fn;
    s.n = n;
    s.next.store(0);
    ++s.batch;
  }
  if (n - 1 >= helpers_)
    s.work.notify_all();
  else
    for (size_t i = 0; i + 1 < n; ++i) s.work.notify_one();
  for (size_t i; (i = s.next.fetch_add(1)) < n;) fn(i);
  std::unique_lock lock(s.mu);
  s.done.wait(lock, [&] { return s.busy == 0; });
  s.fn = nullptr;
  s.n = 0;
}

}  // namespace corral
