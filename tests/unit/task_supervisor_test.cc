// The one supervisor of the agent's processes: output and EOF before the exit, stdin fed
// through a pipe or a terminal, signals to the process group, leftovers killed at the
// exit, handlers that forget their own process, and spawns queued in a turn of the loop
// that start together on the spawn threads.
#include "node/exec/task_supervisor.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "node/exec/wait_status.h"
#include "util/event_loop.h"

namespace corral::node {
namespace {

SpawnRequest sh(const std::string& script) {
  SpawnRequest r;
  r.argv = {"/bin/sh", "-c", script};
  r.env = {"PATH=/usr/bin:/bin"};
  r.cwd = "/";
  return r;
}

// What one process reported, in order.
struct Seen {
  std::string out, err;
  std::vector<std::string> events;  // "out", "err", "eof-out", "eof-err", "exit"
  std::optional<TaskSupervisor::Exit> exit;
};

class TaskSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok()) << l.message();
    loop_ = std::move(*l);
    tasks_ = std::make_unique<TaskSupervisor>(*loop_);
  }

  TaskSupervisor::Handlers recorder(Seen& seen) {
    TaskSupervisor::Handlers h;
    h.output = [&seen](bool is_err, std::string_view data, bool eof) {
      if (eof) {
        seen.events.push_back(is_err ? "eof-err" : "eof-out");
        return;
      }
      (is_err ? seen.err : seen.out).append(data);
      if (seen.events.empty() || seen.events.back() != (is_err ? "err" : "out"))
        seen.events.push_back(is_err ? "err" : "out");
    };
    h.exited = [&seen](const TaskSupervisor::Exit& e) {
      seen.events.push_back("exit");
      seen.exit = e;
    };
    return h;
  }

  // Runs the loop, reaping children as the agent does, until `done` or `seconds` pass.
  bool run_until(const std::function<bool()>& done, double seconds = 5) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    bool ok = false;
    std::function<void()> tick = [&] {
      int status = 0;
      rusage ru{};
      pid_t pid;
      while ((pid = ::wait4(-1, &status, WNOHANG, &ru)) > 0) tasks_->on_child_exit(pid, status, 0);
      if (done()) {
        ok = true;
        return loop_->stop();
      }
      if (std::chrono::steady_clock::now() > deadline) return loop_->stop();
      loop_->add_timer(0.005, tick);
    };
    loop_->post(tick);
    loop_->run();
    return ok;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<TaskSupervisor> tasks_;
};

TEST_F(TaskSupervisorTest, OutputAndItsEndComeBeforeTheExit) {
  Seen seen;
  auto pid = tasks_->spawn(sh("echo out; echo err >&2; exit 3"), recorder(seen));
  ASSERT_TRUE(pid) << pid.message();
  EXPECT_EQ(tasks_->live(), 1u);
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  EXPECT_EQ(seen.out, "out\n");
  EXPECT_EQ(seen.err, "err\n");
  EXPECT_EQ(seen.exit->waitstatus, exit_status(3));
  EXPECT_EQ(seen.events.back(), "exit");
  EXPECT_EQ(std::count(seen.events.begin(), seen.events.end(), "eof-out"), 1);
  EXPECT_EQ(std::count(seen.events.begin(), seen.events.end(), "eof-err"), 1);
  EXPECT_EQ(tasks_->live(), 0u);
}

TEST_F(TaskSupervisorTest, StdinThroughAPipeIsFedAndClosed) {
  Seen seen;
  auto pid = tasks_->spawn(sh("cat; echo done"), recorder(seen), TaskSupervisor::Stdin::pipe);
  ASSERT_TRUE(pid) << pid.message();
  EXPECT_TRUE(tasks_->feed(*pid, "hello", false));
  EXPECT_TRUE(tasks_->feed(*pid, " world\n", true));  // cat ends only if stdin is closed
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  EXPECT_EQ(seen.out, "hello world\ndone\n");
  EXPECT_EQ(seen.exit->waitstatus, 0);
  EXPECT_FALSE(tasks_->feed(*pid, "late", false));  // reaped: nothing to feed
}

TEST_F(TaskSupervisorTest, AProcessWithoutAFedStdinTakesNoFeed) {
  Seen seen;
  auto pid = tasks_->spawn(sh("cat"), recorder(seen));  // stdin is /dev/null
  ASSERT_TRUE(pid) << pid.message();
  EXPECT_FALSE(tasks_->feed(*pid, "x", true));
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  EXPECT_EQ(seen.out, "");
}

TEST_F(TaskSupervisorTest, ATerminalIsStdinStdoutAndStderr) {
  Seen seen;
  auto pid = tasks_->spawn(sh("test -t 0 && test -t 1 && test -t 2 && echo tty; read x; echo got $x >&2"),
                           recorder(seen), TaskSupervisor::Stdin::terminal);
  ASSERT_TRUE(pid) << pid.message();
  tasks_->set_window_size(*pid, 40, 100);
  tasks_->feed(*pid, "abc\n", false);
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  EXPECT_NE(seen.out.find("tty"), std::string::npos) << seen.out;
  EXPECT_NE(seen.out.find("got abc"), std::string::npos) << seen.out;  // stderr too
  EXPECT_EQ(seen.err, "");
  EXPECT_EQ(std::count(seen.events.begin(), seen.events.end(), "eof-err"), 0);  // no second stream
}

// A terminal's master is also the task's stdin (a second descriptor of the same file):
// when the task lets go of the terminal and goes on, the output side stops being watched
// without the loop being woken again and again by the closed terminal until the exit.
TEST_F(TaskSupervisorTest, ATaskThatLetsGoOfItsTerminalDoesNotKeepTheLoopBusy) {
  Seen seen;
  auto pid = tasks_->spawn(sh("echo bye; exec </dev/null >/dev/null 2>&1; sleep 0.5"), recorder(seen),
                           TaskSupervisor::Stdin::terminal);
  ASSERT_TRUE(pid) << pid.message();
  size_t turns = 0;
  loop_->set_end_of_iteration([&] { ++turns; });
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  loop_->set_end_of_iteration({});
  EXPECT_NE(seen.out.find("bye"), std::string::npos) << seen.out;
  EXPECT_EQ(std::count(seen.events.begin(), seen.events.end(), "eof-out"), 1);
  EXPECT_LT(turns, 1000u);  // a 5 ms tick for 0.5 s is about 100; a busy loop, hundreds of thousands
}

TEST_F(TaskSupervisorTest, SignalsReachTheProcessGroup) {
  Seen seen;
  auto pid = tasks_->spawn(sh("sleep 100; echo not reached"), recorder(seen));
  ASSERT_TRUE(pid) << pid.message();
  tasks_->signal(*pid, SIGTERM);
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));
  EXPECT_EQ(seen.exit->waitstatus, SIGTERM);  // the sleep died of it and sh too
  EXPECT_EQ(seen.out, "");
}

TEST_F(TaskSupervisorTest, LeftoversDieWithTheProcess) {
  Seen seen;
  auto pid = tasks_->spawn(sh("sleep 100 & echo $!; exit 0"), recorder(seen));
  ASSERT_TRUE(pid) << pid.message();
  ASSERT_TRUE(run_until([&] { return seen.exit.has_value(); }));  // though the sleep holds stdout
  const pid_t bg = static_cast<pid_t>(std::stol(seen.out));
  EXPECT_TRUE(run_until([&] {
    std::ifstream stat("/proc/" + std::to_string(bg) + "/stat");
    std::string s;
    std::getline(stat, s);
    return s.empty() || s.find(") Z") != std::string::npos;  // gone, or a zombie of ours
  })) << "background process "
      << bg << " outlived its task";
  ::kill(bg, SIGKILL);
}

TEST_F(TaskSupervisorTest, AHandlerMayForgetItsOwnProcess) {
  Seen seen;
  pid_t self = -1;
  TaskSupervisor::Handlers h = recorder(seen);
  h.output = [&](bool, std::string_view data, bool) {
    seen.out.append(data);
    tasks_->forget(self);  // the owner goes away in the middle of its own handler
  };
  auto pid = tasks_->spawn(sh("echo one; sleep 0.2; echo two"), std::move(h));
  ASSERT_TRUE(pid) << pid.message();
  self = *pid;
  ASSERT_TRUE(run_until([&] { return !seen.out.empty(); }));
  EXPECT_EQ(tasks_->live(), 0u);
  run_until([] { return false; }, 0.5);  // the process exits: nobody is told
  EXPECT_EQ(seen.out, "one\n");
  EXPECT_FALSE(seen.exit.has_value());
}

TEST_F(TaskSupervisorTest, AFailedSpawnStartsNothing) {
  Seen seen;
  SpawnRequest r = sh("true");
  r.argv = {"/nonexistent/program"};
  auto pid = tasks_->spawn(r, recorder(seen));
  ASSERT_FALSE(pid);
  EXPECT_EQ(spawn_failure_code(pid.error()), 127);
  EXPECT_EQ(tasks_->live(), 0u);
}

// Queued in one turn, started together (on two spawn threads): each is supervised
// before its `done` runs, a failed one starts nothing, and every exit and output comes.
TEST_F(TaskSupervisorTest, QueuedSpawnsStartTogetherAndAreSupervisedFirst) {
  tasks_->set_spawn_helpers(2);
  constexpr int kCount = 12;
  std::vector<Seen> seen(kCount);
  std::vector<std::optional<Result<pid_t>>> done(kCount);
  size_t live_at_done = 0;
  for (int i = 0; i < kCount; ++i) {
    SpawnRequest r = sh("echo " + std::to_string(i) + "; exit " + std::to_string(i % 4));
    if (i == 5) r.argv = {"/nonexistent/program"};
    tasks_->spawn_later(r, recorder(seen[static_cast<size_t>(i)]), [&, i](Result<pid_t> pid) {
      if (pid) live_at_done += tasks_->live() > 0 ? 1 : 0;
      done[static_cast<size_t>(i)] = std::move(pid);
    });
  }
  EXPECT_EQ(tasks_->live(), 0u);  // nothing before the loop's turn
  ASSERT_TRUE(run_until([&] {
    for (int i = 0; i < kCount; ++i)
      if (i != 5 && !seen[static_cast<size_t>(i)].exit) return false;
    return true;
  }));
  for (int i = 0; i < kCount; ++i) {
    const auto& d = done[static_cast<size_t>(i)];
    ASSERT_TRUE(d.has_value()) << i;
    if (i == 5) {
      ASSERT_FALSE(*d);
      EXPECT_EQ(spawn_failure_code(d->error()), 127);
      EXPECT_FALSE(seen[5].exit.has_value());
      continue;
    }
    ASSERT_TRUE(*d) << d->message();
    EXPECT_EQ(seen[static_cast<size_t>(i)].out, std::to_string(i) + "\n");
    EXPECT_EQ(seen[static_cast<size_t>(i)].exit->waitstatus, exit_status(i % 4));
  }
  EXPECT_EQ(live_at_done, static_cast<size_t>(kCount - 1));
  EXPECT_EQ(tasks_->live(), 0u);
}

// The spawn threads start a batch while the loop goes on; exits the agent reaps before the
// batch is taken in wait for it: every process is supervised and its `done` runs before
// its output and exit are reported.
TEST_F(TaskSupervisorTest, ExitsReapedBeforeTheirSpawnIsTakenInWaitForIt) {
  tasks_->set_spawn_helpers(2);
  constexpr size_t kCount = 6;
  std::vector<Seen> seen(kCount);
  for (size_t i = 0; i < kCount; ++i)
    tasks_->spawn_later(sh("echo " + std::to_string(i) + "; exit " + std::to_string(i)), recorder(seen[i]),
                        [&, i](Result<pid_t> pid) {
                          ASSERT_TRUE(pid) << pid.message();
                          seen[i].events.push_back("done");
                        });
  tasks_->spawn_queued();  // handed to the spawn threads; the loop is not running
  EXPECT_EQ(tasks_->live(), 0u);
  size_t reaped = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reaped < kCount && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    rusage ru{};
    pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    EXPECT_TRUE(tasks_->on_child_exit(pid, status, 0));  // kept: it may be the batch's
    ++reaped;
  }
  ASSERT_EQ(reaped, kCount);
  for (const auto& s : seen) EXPECT_TRUE(s.events.empty());
  ASSERT_TRUE(run_until(
      [&] { return std::all_of(seen.begin(), seen.end(), [](const Seen& s) { return s.exit.has_value(); }); }));
  for (size_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(seen[i].events.front(), "done") << i;
    EXPECT_EQ(seen[i].events.back(), "exit") << i;
    EXPECT_EQ(seen[i].out, std::to_string(i) + "\n");
    EXPECT_EQ(seen[i].exit->waitstatus, exit_status(static_cast<int>(i)));
  }
  EXPECT_EQ(tasks_->live(), 0u);
  // Nothing in flight: an unknown pid (an orphan reparented to the agent) is not kept.
  EXPECT_FALSE(tasks_->on_child_exit(999999, 0, 0));
}

// A supervisor destroyed while its spawn threads start a batch leaves nothing running.
TEST_F(TaskSupervisorTest, ABatchStillStartingWhenTheSupervisorGoesIsKilled) {
  tasks_->set_spawn_helpers(2);
  std::vector<Seen> seen(4);
  for (auto& s : seen) tasks_->spawn_later(sh("sleep 30"), recorder(s), [](Result<pid_t>) {});
  tasks_->spawn_queued();
  tasks_.reset();  // joins the spawn threads, then kills what they started
  size_t reaped = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reaped < seen.size() && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    ++reaped;
  }
  EXPECT_EQ(reaped, seen.size());
  for (const auto& s : seen) EXPECT_TRUE(s.events.empty());
}

TEST(TaskSupervisorDefaults, SpawnHelpersAreHalfTheCpusAtMostEight) {
  EXPECT_EQ(TaskSupervisor::default_spawn_helpers(), std::min(8u, std::thread::hardware_concurrency() / 2));
}

// spawn_queued starts what is queued at once, and a `done` may queue more, which the loop
// then starts in its next turn.
TEST_F(TaskSupervisorTest, ADoneMayQueueTheNextSpawn) {
  Seen first, second;
  bool second_done = false;
  tasks_->spawn_later(sh("exit 0"), recorder(first), [&](Result<pid_t> pid) {
    ASSERT_TRUE(pid);
    tasks_->spawn_later(sh("exit 7"), recorder(second), [&](Result<pid_t> p) { second_done = p.ok(); });
  });
  tasks_->spawn_queued();
  EXPECT_EQ(tasks_->live(), 1u);
  ASSERT_TRUE(run_until([&] { return first.exit && second.exit; }));
  EXPECT_TRUE(second_done);
  EXPECT_EQ(second.exit->waitstatus, exit_status(7));
}

}  // namespace
}  // namespace corral::node
