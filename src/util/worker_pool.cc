#include "util/worker_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace corral {

struct WorkerPool::Shared {
  std::mutex mu;
  std::condition_variable work;
  std::deque<std::function<void()>> queue;  // under mu
  bool stop = false;                        // under mu
  std::vector<std::thread> threads;         // under mu

  void worker() {
    std::unique_lock lock(mu);
    for (;;) {
      work.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and nothing left
      std::function<void()> fn = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
};

WorkerPool::WorkerPool(unsigned threads) : threads_(threads == 0 ? 1 : threads), shared_(std::make_unique<Shared>()) {}

WorkerPool::~WorkerPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
    threads = std::move(shared_->threads);
  }
  shared_->work.notify_all();
  for (auto& t : threads) t.join();
}

void WorkerPool::post(std::function<void()> fn) {
  Shared& s = *shared_;
  {
    std::lock_guard lock(s.mu);
    s.queue.push_back(std::move(fn));
    if (s.threads.empty()) {
      s.threads.reserve(threads_);
      for (unsigned i = 0; i < threads_; ++i) s.threads.emplace_back([&s] { s.worker(); });
    }
  }
  s.work.notify_one();
}

}  // namespace corral
