// Runs an agent's event loop in a test until a condition holds.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "util/event_loop.h"

namespace corral::test {

// Runs `loop` until `done` holds (checked every 5 ms) or `seconds` pass; true if it held.
inline bool run_loop_until(EventLoop& loop, const std::function<bool()>& done, double seconds = 10) {
  bool ok = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::function<void()> check = [&] {
    if (done()) {
      ok = true;
      loop.stop();
    } else if (std::chrono::steady_clock::now() > deadline) {
      loop.stop();
    } else {
      loop.add_timer(0.005, check);
    }
  };
  loop.add_timer(0, check);
  loop.run();
  return ok;
}

// Polls `done` every 5 ms from this thread (the loop runs elsewhere) for up to `seconds`.
inline bool wait_until(const std::function<bool()>& done, double seconds = 10) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace corral::test
