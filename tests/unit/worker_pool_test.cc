// WorkerPool: every posted call runs once, on the pool's threads, several at once, from
// posters on any thread; its destruction runs what is still queued.
#include "util/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace corral {
namespace {

TEST(WorkerPoolTest, EveryCallOnceFromSeveralPosters) {
  std::vector<std::atomic<int>> calls(4000);
  {
    WorkerPool pool(3);
    std::vector<std::thread> posters;
    for (size_t t = 0; t < 4; ++t)
      posters.emplace_back([&, t] {
        for (size_t i = t; i < calls.size(); i += 4) pool.post([&calls, i] { calls[i].fetch_add(1); });
      });
    for (auto& p : posters) p.join();
  }  // runs what is left, then joins
  for (size_t i = 0; i < calls.size(); ++i) ASSERT_EQ(calls[i].load(), 1) << "call " << i;
}

// Each call waits until another runs at the same time: with one thread, the first would
// time out.
TEST(WorkerPoolTest, CallsRunSideBySideOffThePostersThread) {
  std::atomic<int> running{0}, overlapped{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  {
    WorkerPool pool(2);
    for (int i = 0; i < 4; ++i)
      pool.post([&] {
        {
          std::lock_guard lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        ++running;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (running.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        if (running.load() >= 2) ++overlapped;
      });
  }
  EXPECT_EQ(overlapped.load(), 4);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
}

TEST(WorkerPoolTest, NothingPostedStartsNoThread) {
  WorkerPool pool(8);
  EXPECT_EQ(pool.threads(), 8u);
}  // and its destruction has nothing to join

}  // namespace
}  // namespace corral
