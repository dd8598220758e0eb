#include "util/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace corral {

namespace {
constexpr uint64_t kWakeToken = 0;
constexpr int kPostedRounds = 4;
}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) return io_error(std::string("epoll_create1: ") + std::strerror(errno));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return io_error(std::string("eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0)
    return io_error(std::string("epoll_ctl: ") + std::strerror(errno));
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(ep), std::move(wake)));
}

EventLoop::EventLoop(UniqueFd epoll, UniqueFd wake) : epoll_(std::move(epoll)), wake_(std::move(wake)) {}

Status EventLoop::add_fd(int fd, uint32_t events, FdCallback cb) {
  uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return io_error("epoll_ctl add fd " + std::to_string(fd) + ": " + std::strerror(errno));
  fds_.emplace(token, FdEntry{fd, std::move(cb)});
  tokens_[fd] = token;
  return {};
}

void EventLoop::remove_fd(int fd) {
  auto it = tokens_.find(fd);
  if (it == tokens_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  fds_.erase(it->second);
  tokens_.erase(it);
}

void EventLoop::close_fd(UniqueFd& fd) {
  if (auto it = tokens_.find(fd.get()); it != tokens_.end()) {
    fds_.erase(it->second);
    tokens_.erase(it);
  }
  fd.reset();
}

Status EventLoop::set_events(int fd, uint32_t events) {
  auto it = tokens_.find(fd);
  if (it == tokens_.end()) return invalid("fd " + std::to_string(fd) + " is not watched");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0)
    return io_error("epoll_ctl mod fd " + std::to_string(fd) + ": " + std::strerror(errno));
  return {};
}

Status EventLoop::rewatch_fd(int fd, uint32_t events, FdCallback cb) {
  auto it = tokens_.find(fd);
  if (it == tokens_.end()) return add_fd(fd, events, std::move(cb));
  const uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    const int err = errno;
    remove_fd(fd);
    return io_error("epoll_ctl mod fd " + std::to_string(fd) + ": " + std::strerror(err));
  }
  fds_.erase(it->second);
  fds_.emplace(token, FdEntry{fd, std::move(cb)});
  it->second = token;
  return {};
}

EventLoop::TimerId EventLoop::add_timer(double seconds, Callback cb) {
  auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds < 0 ? 0 : seconds));
  TimerId id{Clock::now() + delay, next_timer_++};
  timers_.emplace(id, std::move(cb));
  return id;
}

void EventLoop::cancel_timer(const TimerId& id) { timers_.erase(id); }

void EventLoop::post(Callback cb) {
  {
    std::lock_guard lock(posted_mu_);
    posted_.push_back(std::move(cb));
  }
  // A callback posting the next step of its work (the agent does several per task) would
  // otherwise cost a write, a wake-up and a read of the eventfd each time.
  if (std::this_thread::get_id() == loop_thread_.load(std::memory_order_relaxed)) return;
  uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof one) < 0) {
    // EAGAIN: the counter is saturated, so the loop is already awake
  }
}

void EventLoop::stop() { stopping_ = true; }

int EventLoop::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  auto left = timers_.begin()->first.first - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // round up so a timer never fires early and spins
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 60'000));
}

void EventLoop::run_timers() {
  auto now = Clock::now();
  // Timers added by callbacks with zero delay run in the next iteration, so a chain of
  // immediate timers cannot starve the fds.
  uint64_t limit = next_timer_;
  while (!timers_.empty()) {
    auto it = timers_.begin();
    if (it->first.first > now || it->first.second >= limit) break;
    Callback cb = std::move(it->second);
    timers_.erase(it);
    cb();
  }
}

bool EventLoop::has_posted() {
  std::lock_guard lock(posted_mu_);
  return !posted_.empty();
}

void EventLoop::run_posted() {
  std::vector<Callback> batch;
  {
    std::lock_guard lock(posted_mu_);
    batch.swap(posted_);
    posted_.swap(spare_);  // a busy loop posts a few callbacks a turn: no allocation for them
  }
  for (auto& cb : batch) cb();
  batch.clear();
  std::lock_guard lock(posted_mu_);
  if (spare_.capacity() < batch.capacity()) spare_.swap(batch);
}

void EventLoop::run() {
  stopping_ = false;
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  loop_thread_ = std::this_thread::get_id();
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, has_posted() ? 0 : next_timeout_ms());
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      uint64_t token = events[i].data.u64;
      if (token == kWakeToken) {
        uint64_t count;
        while (::read(wake_.get(), &count, sizeof count) > 0) {}
        continue;
      }
      auto it = fds_.find(token);
      if (it == fds_.end()) continue;  // removed by an earlier callback of this batch
      FdCallback cb = it->second.cb;   // the callback may remove its own registration
      cb(events[i].events);
    }
    // What posted work posts (a launch's next part, a flush) runs in this turn too, for a
    // few rounds: each round back through epoll_wait was a system call for nothing, and
    // descriptors wait for at most these rounds.
    for (int round = 0; round < kPostedRounds; ++round) {
      run_posted();
      if (stopping_ || !has_posted()) break;
    }
    run_timers();
    if (end_of_iteration_) end_of_iteration_();
  }
  loop_thread_ = std::thread::id();
}

}  // namespace corral
