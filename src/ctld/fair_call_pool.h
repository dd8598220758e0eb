// Runs calls on a few threads, taking their users in turn: each user's calls wait in a
// queue of their own, and a free thread serves the user in the rotation with the fewest
// calls running. One user's slow calls (listings of 100,000 jobs) can fill the threads
// only while nobody else waits: any other user's call takes the next thread to come free,
// however many the first one queued.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace corral::ctld {

class FairCallPool {
 public:
  explicit FairCallPool(size_t threads);
  ~FairCallPool();  // runs nothing more; waits for the calls running
  FairCallPool(const FairCallPool&) = delete;
  FairCallPool& operator=(const FairCallPool&) = delete;

  // Thread-safe. `call` runs on one of the pool's threads.
  void run(uint32_t uid, std::function<void()> call);

 private:
  void work();

  std::mutex mu_;
  std::condition_variable ready_;
  std::unordered_map<uint32_t, std::deque<std::function<void()>>> queued_;  // by uid
  std::deque<uint32_t> turn_;  // users with calls queued, in the order they are served
  std::unordered_map<uint32_t, size_t> running_;  // calls running, by uid
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace corral::ctld
