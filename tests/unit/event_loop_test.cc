// EventLoop's posted callbacks: from the loop's own thread they need no wake-up (the loop
// looks before it sleeps), from other threads they wake it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "util/event_loop.h"
#include "util/unique_fd.h"

namespace corral {
namespace {

std::unique_ptr<EventLoop> make_loop() {
  auto loop = EventLoop::create();
  EXPECT_TRUE(loop) << loop.message();
  return std::move(*loop);
}

TEST(EventLoopTest, ARewatchedFdsEventsGoToTheNewCallbackOnly) {
  auto loop = make_loop();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int old_calls = 0, new_calls = 0;
  ASSERT_TRUE(loop->add_fd(sv[0], EPOLLIN, [&](uint32_t) { ++old_calls; }));
  ASSERT_EQ(::write(sv[1], "x", 1), 1);
  // Rewatched from inside a callback of the same turn, as a connection's next call is.
  ASSERT_TRUE(loop->add_fd(sv[1], EPOLLOUT, [&](uint32_t) {
    loop->remove_fd(sv[1]);
    ASSERT_TRUE(loop->rewatch_fd(sv[0], EPOLLIN, [&](uint32_t) {
      ++new_calls;
      loop->stop();
    }));
  }));
  auto watchdog = loop->add_timer(10, [&] { loop->stop(); });
  loop->run();
  loop->cancel_timer(watchdog);
  EXPECT_EQ(new_calls, 1);
  EXPECT_LE(old_calls, 1);  // it may have run before the rewatch, in the same turn
  // An fd that is not watched is added.
  int added = 0;
  ASSERT_TRUE(loop->rewatch_fd(sv[1], EPOLLOUT, [&](uint32_t) {
    ++added;
    loop->stop();
  }));
  loop->run();
  EXPECT_EQ(added, 1);
  ::close(sv[0]);
  ::close(sv[1]);
}

// close_fd leaves the kernel to take the fd out of the epoll set. Its number, reused at
// once, is watched anew; a copy of the closed file that lives on (a forking thread's child
// holds one until it execs) keeps reporting under the old token, which finds no callback.
TEST(EventLoopTest, AClosedFdsCallbackNeverRunsAndItsNumberCanBeWatchedAgain) {
  auto loop = make_loop();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd watched(sv[0]), peer(sv[1]);
  int old_calls = 0;
  ASSERT_TRUE(loop->add_fd(watched.get(), EPOLLIN, [&](uint32_t) { ++old_calls; }));
  UniqueFd copy(::fcntl(watched.get(), F_DUPFD_CLOEXEC, 0));
  const int number = watched.get();
  loop->close_fd(watched);
  EXPECT_FALSE(watched.valid());
  ASSERT_EQ(::write(peer.get(), "x", 1), 1);  // the copy's file is readable: its stale entry fires
  int again[2];
  ASSERT_EQ(::pipe2(again, O_CLOEXEC), 0);
  UniqueFd reader(again[0]), writer(again[1]);
  if (reader.get() != number) {  // take the closed number for the new watch
    ASSERT_EQ(::dup3(reader.get(), number, O_CLOEXEC), number);
    reader.reset(number);
  }
  int new_calls = 0;
  ASSERT_TRUE(loop->add_fd(reader.get(), EPOLLIN, [&](uint32_t) {
    ++new_calls;
    loop->stop();
  }));
  ASSERT_EQ(::write(writer.get(), "y", 1), 1);
  auto watchdog = loop->add_timer(10, [&] { loop->stop(); });
  loop->run();
  loop->cancel_timer(watchdog);
  EXPECT_EQ(new_calls, 1);
  EXPECT_EQ(old_calls, 0);
  loop->remove_fd(reader.get());
}

TEST(EventLoopTest, PostsFromTheLoopThreadRunWithoutAnythingElseToWakeIt) {
  auto loop = make_loop();
  std::vector<int> order;
  // A chain of posts, each from the callback before it, with no fd and no timer to end
  // epoll_wait: a loop that slept here would hang until the watchdog.
  bool watchdog_fired = false;
  auto watchdog = loop->add_timer(10, [&] {
    watchdog_fired = true;
    loop->stop();
  });
  std::function<void(int)> chain = [&](int i) {
    order.push_back(i);
    if (i == 100) {
      loop->cancel_timer(watchdog);
      loop->stop();
      return;
    }
    loop->post([&chain, i] { chain(i + 1); });
  };
  loop->post([&] { chain(0); });
  loop->run();
  EXPECT_FALSE(watchdog_fired);
  ASSERT_EQ(order.size(), 101u);
  for (int i = 0; i <= 100; ++i) EXPECT_EQ(order[i], i);
}

// What a posted callback posts runs in the same turn, a few rounds deep, so that a chain
// (a launch's next part, then its flush) costs no trip through epoll_wait; a longer chain
// goes on in the next turns, after the descriptors.
TEST(EventLoopTest, PostsFromPostedWorkRunInTheSameTurnAFewRoundsDeep) {
  auto loop = make_loop();
  int turns = 0;
  std::vector<int> turn_of;
  loop->set_end_of_iteration([&] { ++turns; });
  std::function<void(int)> chain = [&](int i) {
    turn_of.push_back(turns);
    if (i == 9) return loop->stop();
    loop->post([&chain, i] { chain(i + 1); });
  };
  loop->post([&] { chain(0); });
  loop->run();
  ASSERT_EQ(turn_of.size(), 10u);
  EXPECT_EQ(turn_of[0], turn_of[3]);  // four rounds in the first turn
  EXPECT_LT(turn_of[3], turn_of[4]);  // then the descriptors get their turn
  EXPECT_LT(turns, 10);
}

TEST(EventLoopTest, PostsFromAnotherThreadWakeTheLoopInOrder) {
  auto loop = make_loop();
  std::vector<int> seen;
  bool watchdog_fired = false;
  loop->add_timer(10, [&] {
    watchdog_fired = true;
    loop->stop();
  });
  std::thread poster([&] {
    for (int i = 0; i < 50; ++i) {
      loop->post([&seen, i] { seen.push_back(i); });
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    loop->post([&] { loop->stop(); });
  });
  loop->run();
  poster.join();
  EXPECT_FALSE(watchdog_fired);
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
}

TEST(EventLoopTest, APostBeforeRunStillWakesTheLoop) {
  auto loop = make_loop();
  bool ran = false;
  loop->post([&] {
    ran = true;
    loop->stop();
  });
  bool watchdog_fired = false;
  loop->add_timer(10, [&] {
    watchdog_fired = true;
    loop->stop();
  });
  loop->run();
  EXPECT_TRUE(ran);
  EXPECT_FALSE(watchdog_fired);
}

}  // namespace
}  // namespace corral
