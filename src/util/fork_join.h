// Runs a batch of independent calls on the calling thread and a few helper threads at
// once, returning when all have returned: the node agent's loop spawns a turn's tasks
// this way, so that the time each spawn holds its thread (vfork waits for the child's
// exec) is spent side by side instead of one after another.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace corral {

class ForkJoin {
 public:
  // `helpers` threads besides the caller, started at the first batch of two or more
  // calls (so they inherit that caller's scheduling priority and signal mask); 0: every
  // call runs on the caller.
  explicit ForkJoin(unsigned helpers);
  ~ForkJoin();
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  // Calls fn(i) once for every i < n, in no particular order, on the caller and the
  // helpers. One batch at a time: run is not reentrant, nor called from two threads.
  void run(size_t n, const std::function<void(size_t)>& fn);
  unsigned helpers() const { return helpers_; }

 private:
  struct Shared;
  unsigned helpers_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace corral
