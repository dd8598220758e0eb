// ForkJoin: every call of a batch exactly once, on the caller and its helpers side by
// side, batch after batch of every size, and nothing but the caller without helpers.
#include "util/fork_join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace corral {
namespace {

TEST(ForkJoinTest, EveryCallOnceAcrossManyBatches) {
  ForkJoin pool(3);
  for (size_t n = 0; n < 300; ++n) {
    const size_t size = n % 23;
    std::vector<std::atomic<int>> calls(size);
    pool.run(size, [&](size_t i) { calls[i].fetch_add(1); });
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(calls[i].load(), 1) << "batch " << n << ", call " << i;
  }
}

// Each call waits until another is running at the same time: without helpers working
// beside the caller, the first call would time out.
TEST(ForkJoinTest, CallsRunSideBySide) {
  ForkJoin pool(2);
  std::atomic<int> running{0}, overlapped{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  pool.run(4, [&](size_t) {
    {
      std::lock_guard lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    ++running;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (running.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (running.load() >= 2) ++overlapped;
  });
  EXPECT_EQ(overlapped.load(), 4);
  EXPECT_GE(threads.size(), 2u);
}

TEST(ForkJoinTest, WithoutHelpersEverythingRunsOnTheCaller) {
  ForkJoin pool(0);
  std::vector<std::thread::id> seen;
  pool.run(5, [&](size_t) { seen.push_back(std::this_thread::get_id()); });  // one thread: no lock needed
  ASSERT_EQ(seen.size(), 5u);
  for (auto id : seen) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(ForkJoinTest, OneCallRunsOnTheCaller) {
  ForkJoin pool(4);
  std::thread::id seen;
  pool.run(1, [&](size_t) { seen = std::this_thread::get_id(); });
  EXPECT_EQ(seen, std::this_thread::get_id());
}

}  // namespace
}  // namespace corral
