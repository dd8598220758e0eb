// A few threads that run posted calls as they come, for work that mostly waits in the
// kernel: the node agent's loop hands a turn's spawns to them (each holds its thread
// until the child has exec'd) and goes on reading requests while they run.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace corral {

class WorkerPool {
 public:
  // `threads` of them, started by the first post (so they inherit that caller's
  // scheduling priority and signal mask).
  explicit WorkerPool(unsigned threads);
  // Runs everything posted, then joins the threads: nothing handed over is dropped.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Thread-safe. Calls run in no particular order, several at once.
  void post(std::function<void()> fn);
  unsigned threads() const { return threads_; }

 private:
  struct Shared;
  unsigned threads_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace corral
