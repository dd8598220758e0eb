// A single-threaded event loop (the node agent's): file descriptors (epoll), timers, and callbacks
// posted from other threads. Everything but post() must be called on the loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/result.h"
#include "util/unique_fd.h"

namespace corral {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Callback = std::function<void()>;
  using FdCallback = std::function<void(uint32_t events)>;
  using TimerId = std::pair<Clock::time_point, uint64_t>;

  static Result<std::unique_ptr<EventLoop>> create();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Level-triggered; `events` is an EPOLLIN/EPOLLOUT mask.
  Status add_fd(int fd, uint32_t events, FdCallback cb);
  void remove_fd(int fd);
  // Stops watching `fd` and closes it, for a caller that holds its file's only descriptor:
  // the close takes it out of the epoll set (no epoll_ctl). An event already fetched in
  // this turn, or one from a copy a forking thread's child holds until it execs, finds no
  // callback and is dropped. While another descriptor of the file stays open (a dup), so
  // does the registration, and its events would wake the loop for nothing: use remove_fd.
  void close_fd(UniqueFd& fd);
  // Changes what a registered fd is watched for (EPOLLHUP and EPOLLERR are always reported).
  Status set_events(int fd, uint32_t events);
  // remove_fd and add_fd in one epoll_ctl: the fd's events go to `cb` from now on, and
  // none already fetched in this turn reaches the old callback or the new one. An fd not
  // watched is added. On failure the fd is no longer watched.
  Status rewatch_fd(int fd, uint32_t events, FdCallback cb);

  TimerId add_timer(double seconds, Callback cb);
  void cancel_timer(const TimerId& id);

  // Thread-safe: runs `cb` on the loop thread, in posting order.
  void post(Callback cb);
  // Runs at the end of every iteration (after fds, timers and posts were handled).
  void set_end_of_iteration(Callback cb) { end_of_iteration_ = std::move(cb); }

  void run();   // until stop()
  void stop();  // loop thread only

 private:
  struct FdEntry {
    int fd;
    FdCallback cb;
  };
  EventLoop(UniqueFd epoll, UniqueFd wake);
  int next_timeout_ms() const;
  bool has_posted();
  void run_timers();
  void run_posted();

  UniqueFd epoll_;
  UniqueFd wake_;                              // eventfd
  std::unordered_map<uint64_t, FdEntry> fds_;  // by token
  std::unordered_map<int, uint64_t> tokens_;   // fd -> token
  uint64_t next_token_ = 1;
  std::map<TimerId, Callback> timers_;
  uint64_t next_timer_ = 1;
  std::mutex posted_mu_;
  std::vector<Callback> posted_;
  std::vector<Callback> spare_;  // an emptied batch, kept for its capacity (under posted_mu_)
  // The thread in run(): what it posts needs no wake-up, as the loop looks at posted_
  // before it sleeps.
  std::atomic<std::thread::id> loop_thread_{};
  Callback end_of_iteration_;
  bool stopping_ = false;
};

}  // namespace corral
