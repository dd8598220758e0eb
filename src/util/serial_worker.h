// One thread that runs posted work in order, for a hook whose calls to the outside world
// block (a REST request, a command): the controller's lock is never held while they wait.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace corral {

class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();  // stop()
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Runs `fn` after everything posted before it; dropped once stopping.
  void post(std::function<void()> fn);
  // Waits `seconds` unless stop() comes first; false when stopping (for retry loops).
  bool pause(double seconds);
  bool stopping() const;
  // Ends the thread after the work running now; work still queued is dropped.
  void stop();

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace corral
