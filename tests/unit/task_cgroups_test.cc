// Task containment in cgroup v2: tasks land in their unit's cgroup (directly and through
// corral-imp), what they leave running dies when the unit is released, a restarted agent
// clears what its predecessor left, and bad settings are refused. The tests that need a
// writable cgroup v2 hierarchy (root on a machine that has one) say so when they skip.
#include "node/exec/task_cgroups.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "loop_until.h"
#include "node/exec/spawn_process.h"
#include "temp_dir.h"
#include "test_programs.h"

namespace corral::node {
namespace {

namespace fs = std::filesystem;

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(stat, s);
  return !s.empty() && s.find(") Z") == std::string::npos;
}

bool eventually_dead(pid_t pid) {
  for (int i = 0; i < 300; ++i) {
    if (!alive(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string cgroup_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return {};
}

// A task that starts a daemon in a session of its own, prints the daemon's pid once the
// daemon leads that session (field 6 of its stat) and exits: no process group of the task
// reaches the daemon any more.
SpawnRequest escaping_task() {
  SpawnRequest r;
  r.argv = {"/bin/sh", "-c",
            "setsid sleep 300 </dev/null >/dev/null 2>&1 & pid=$!; "
            "while [ \"$(cut -d' ' -f6 /proc/$pid/stat)\" != $pid ]; do sleep 0.01; done; echo $pid"};
  r.env = {"PATH=/usr/bin:/bin"};
  r.cwd = "/";
  return r;
}

class TaskCgroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop);
    loop_ = std::move(*loop);
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroup directories)";
    std::string why;
    auto cg = TaskCgroups::open(*loop_, "auto", "node[0-1]", state_.str(), &why);
    ASSERT_TRUE(cg) << cg.message();
    if (!*cg) GTEST_SKIP() << "no writable cgroup v2 hierarchy here: " << why;
    cgroups_ = std::move(*cg);
  }

  // Starts the escaping task in `dir` and returns the daemon's pid (the task is reaped).
  pid_t start_escaper(const std::vector<std::string>& dirs, const std::string& imp = {}) {
    SpawnRequest r = escaping_task();
    r.cgroups = dirs;
    if (!imp.empty()) {
      r.imp_path = imp;
      r.uid = 65534;
      r.gid = 65534;
    }
    auto p = spawn_process(r);
    EXPECT_TRUE(p) << p.message();
    if (!p) return -1;
    pid_t daemon = static_cast<pid_t>(std::stol("0" + test::read_line(p->stdout_pipe.get())));
    int st = 0;
    ::waitpid(p->pid, &st, 0);
    EXPECT_EQ(st, 0);
    return daemon;
  }

  test::TempDir state_{"corral-cgroups"};
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<TaskCgroups> cgroups_;
};

TEST_F(TaskCgroupsTest, WhatATaskLeavesRunningDiesWithItsUnit) {
  auto dir = cgroups_->create(42, "step_0-1");
  ASSERT_TRUE(dir) << dir.message();
  EXPECT_EQ(dir->front().rfind(cgroups_->root() + "/job_42/step_slot_", 0), 0u) << dir->front();
  const pid_t daemon = start_escaper(*dir);
  ASSERT_GT(daemon, 0);
  EXPECT_TRUE(alive(daemon));
  EXPECT_NE(::getpgid(daemon), ::getpgrp());
  EXPECT_NE(cgroup_of(daemon).find(dir->front().substr(cgroups_->root().size())), std::string::npos)
      << cgroup_of(daemon);

  auto other = cgroups_->create(42, "job_tasks");  // a sibling unit of the same job is not touched
  ASSERT_TRUE(other);
  const pid_t bystander = start_escaper(*other);

  cgroups_->release(42, "step_0-1");
  EXPECT_TRUE(eventually_dead(daemon));
  EXPECT_TRUE(alive(bystander));
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  for (const auto& d : *dir) EXPECT_FALSE(fs::exists(d)) << d;
  EXPECT_TRUE(fs::exists(cgroups_->root() + "/job_42"));  // "job_tasks" is still there

  cgroups_->release(42, "job_tasks");
  EXPECT_TRUE(eventually_dead(bystander));
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  EXPECT_FALSE(fs::exists(cgroups_->root() + "/job_42"));
  cgroups_->release(42, "never-created");  // nothing to do, nothing breaks
}

// The step slots of job `jobid` (its step cgroups, in use or free).
std::vector<std::string> slots(const std::string& root, uint64_t jobid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root + "/job_" + std::to_string(jobid), ec))
    if (e.path().filename().string().rfind("step_slot_", 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

// Every hierarchy's line of /proc/PID/cgroup that names a unit of the job.
std::vector<std::string> unit_lines(pid_t pid, uint64_t jobid) {
  std::vector<std::string> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.find("/job_" + std::to_string(jobid) + "/") != std::string::npos) out.push_back(line);
  return out;
}

TEST_F(TaskCgroupsTest, AnOpenJobsEmptiedStepSlotsServeItsNextSteps) {
  cgroups_->open_job(21);
  ASSERT_TRUE(cgroups_->create(21, "job_tasks"));
  auto first = cgroups_->create(21, "step_0-1");
  ASSERT_TRUE(first) << first.message();
  cgroups_->release(21, "step_0-1");  // nothing ran in it: empty, kept free
  for (const auto& d : *first) EXPECT_TRUE(fs::exists(d)) << d;
  ASSERT_EQ(slots(cgroups_->root(), 21).size(), 1u);

  auto second = cgroups_->create(21, "step_1-2");
  ASSERT_TRUE(second) << second.message();
  EXPECT_EQ(*second, *first);
  auto third = cgroups_->create(21, "step_2-3");  // at the same time: a slot of its own
  ASSERT_TRUE(third) << third.message();
  EXPECT_NE(third->front(), second->front());
  // A task of the step is in its slot in every hierarchy (v1 ones on hybrid machines too).
  SpawnRequest r = escaping_task();
  r.cgroups = *second;
  r.argv = {"/bin/sh", "-c", "echo started; sleep 1"};
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  test::read_line(p->stdout_pipe.get());
  const auto lines = unit_lines(p->pid, 21);
  EXPECT_EQ(lines.size(), second->size());
  const std::string slot = fs::path(second->front()).filename().string();
  for (const auto& l : lines) EXPECT_TRUE(l.ends_with("/job_21/" + slot)) << l;
  int st = 0;
  ::waitpid(p->pid, &st, 0);
  cgroups_->release(21, "step_1-2");
  cgroups_->release(21, "step_2-3");
  EXPECT_EQ(slots(cgroups_->root(), 21).size(), 2u);

  // The job's end takes its slots and its directory.
  cgroups_->release(21, "job_tasks");
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  EXPECT_FALSE(fs::exists(cgroups_->root() + "/job_21"));
  // A step ending after its job is removed, not kept.
  ASSERT_TRUE(cgroups_->create(21, "step_3-4"));
  cgroups_->release(21, "step_3-4");
  EXPECT_FALSE(fs::exists(cgroups_->root() + "/job_21"));
}

TEST_F(TaskCgroupsTest, ASlotWithProcessesLeftIsKilledAndRemoved) {
  cgroups_->open_job(22);
  ASSERT_TRUE(cgroups_->create(22, "job_tasks"));
  // A slot found empty once (its status file kept open for the next check) is found
  // busy when the next step leaves something behind.
  auto before = cgroups_->create(22, "step_9-1");
  ASSERT_TRUE(before);
  cgroups_->release(22, "step_9-1");
  ASSERT_EQ(slots(cgroups_->root(), 22).size(), 1u);
  auto dir = cgroups_->create(22, "step_0-1");
  ASSERT_TRUE(dir);
  EXPECT_EQ(*dir, *before);
  const pid_t daemon = start_escaper(*dir);
  ASSERT_GT(daemon, 0);
  cgroups_->release(22, "step_0-1");
  EXPECT_TRUE(eventually_dead(daemon));
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  EXPECT_TRUE(slots(cgroups_->root(), 22).empty());
  for (const auto& d : *dir) EXPECT_FALSE(fs::exists(d)) << d;
  // Closed jobs keep nothing either (job 42's steps above).
  cgroups_->release(22, "job_tasks");
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  EXPECT_FALSE(fs::exists(cgroups_->root() + "/job_22"));
}

TEST_F(TaskCgroupsTest, LaunchFailuresInACgroupReadAsWithoutOne) {
  auto dir = cgroups_->create(5, "job_tasks");
  ASSERT_TRUE(dir);
  SpawnRequest r = escaping_task();
  r.cgroups = *dir;
  r.argv = {"no-such-command-here"};
  auto missing = spawn_process(r);
  ASSERT_FALSE(missing);
  EXPECT_EQ(spawn_failure_code(missing.error()), 127);
  EXPECT_NE(missing.message().find("cannot execute 'no-such-command-here'"), std::string::npos) << missing.message();

  r.argv = {"/bin/true"};
  r.cgroups = {dir->front() + "/gone"};
  auto nowhere = spawn_process(r);
  ASSERT_FALSE(nowhere);
  EXPECT_NE(nowhere.message().find("cannot move the task into cgroup " + dir->front() + "/gone"), std::string::npos)
      << nowhere.message();

  // The child runs with the actions applied: cwd, stdio, a fresh process group.
  r = escaping_task();
  r.cgroups = *dir;
  r.cwd = "/tmp";
  r.argv = {"/bin/sh", "-c", "pwd; cut -d' ' -f5 /proc/$$/stat; echo $$"};
  auto ok = spawn_process(r);
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_EQ(test::read_line(ok->stdout_pipe.get()), "/tmp");
  const std::string pgid = test::read_line(ok->stdout_pipe.get());
  EXPECT_EQ(pgid, test::read_line(ok->stdout_pipe.get()));
  int st = 0;
  ::waitpid(ok->pid, &st, 0);
  EXPECT_EQ(st, 0);
}

// An exec that fails in the child itself (the file is there and executable, its
// interpreter is not) is reported by the child, through the memory it shares with the
// agent until it execs, created in the cgroup as every task is.
TEST_F(TaskCgroupsTest, AnExecThatFailsInTheChildIsReported) {
  auto dir = cgroups_->create(9, "job_tasks");
  ASSERT_TRUE(dir) << dir.message();
  test::TempDir scripts{"corral-exec-fails"};
  const std::string script = (scripts.path() / "no-interpreter").string();
  {
    std::ofstream out(script);
    out << "#!/no/such/interpreter\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  SpawnRequest r = escaping_task();
  r.cgroups = *dir;
  r.argv = {script};
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.message(), "cannot execute '" + script + "': No such file or directory");
  EXPECT_EQ(spawn_failure_code(p.error()), 127);
}

// The child is created inside the v2 cgroup (clone3 CLONE_INTO_CGROUP, spawn_child.cc)
// rather than joining it: the task's first instruction already runs there.
// A step slot's directory is opened once for clone3 and kept while the slot lives: the
// next step in the slot gets the same descriptor, and a task is created through it (the
// path is only for the fallback and the messages).
TEST_F(TaskCgroupsTest, AStepSlotStaysOpenForItsTasksWhileItLives) {
  cgroups_->open_job(23);
  ASSERT_TRUE(cgroups_->create(23, "job_tasks"));
  auto first = cgroups_->create(23, "step_0-1");
  ASSERT_TRUE(first) << first.message();
  auto entry = cgroups_->entry(23, "step_0-1");
  if (!entry && !fs::exists("/sys/fs/cgroup/cgroup.controllers") &&
      !fs::exists("/sys/fs/cgroup/unified/cgroup.controllers"))
    GTEST_SKIP() << "no cgroup v2 hierarchy: tasks join by cgroup.procs";
  ASSERT_TRUE(entry && entry->valid());
  EXPECT_EQ(cgroups_->entry(23, "job_tasks"), nullptr);  // not a step slot
  EXPECT_EQ(cgroups_->entry(23, "step_9-9"), nullptr);   // never created

  SpawnRequest r = escaping_task();
  r.cgroups = {"/nonexistent/cgroup"};
  r.cgroup_entry = entry;
  r.argv = {"/bin/sh", "-c", "grep '^0::' /proc/$$/cgroup"};
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(
      test::read_line(p->stdout_pipe.get()).ends_with("/job_23/" + fs::path(first->front()).filename().string()));
  int st = 0;
  ::waitpid(p->pid, &st, 0);
  EXPECT_EQ(st, 0);
  r.cgroup_entry.reset();

  cgroups_->release(23, "step_0-1");  // emptied: kept free, and open
  auto second = cgroups_->create(23, "step_1-2");
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(cgroups_->entry(23, "step_1-2"), entry);
  cgroups_->release(23, "step_1-2");
  cgroups_->release(23, "job_tasks");  // the job ends: its slots go, and their descriptors
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return cgroups_->draining() == 0; }));
  EXPECT_EQ(entry.use_count(), 1);  // only this test holds it now
}

TEST_F(TaskCgroupsTest, ATaskStartsInsideItsCgroup) {
  auto dir = cgroups_->create(8, "job_tasks");
  ASSERT_TRUE(dir) << dir.message();
  SpawnRequest r = escaping_task();
  r.cgroups = *dir;
  r.argv = {"/bin/sh", "-c", "grep '^0::' /proc/$$/cgroup"};
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_NE(test::read_line(p->stdout_pipe.get()).find("/job_8/job_tasks"), std::string::npos);
  int st = 0;
  ::waitpid(p->pid, &st, 0);
  EXPECT_EQ(st, 0);
  cgroups_->release(8, "job_tasks");
}

TEST_F(TaskCgroupsTest, ImpStartsInsideTheCgroupBeforeBecomingTheUser) {
  const fs::path imp = fs::read_symlink("/proc/self/exe").parent_path() / "corral-imp";
  if (!fs::exists(imp)) GTEST_SKIP() << "corral-imp not built next to the test";
  auto dir = cgroups_->create(7, "job_tasks");
  ASSERT_TRUE(dir) << dir.message();
  const pid_t daemon = start_escaper(*dir, imp.string());
  ASSERT_GT(daemon, 0);
  EXPECT_NE(cgroup_of(daemon).find("/job_7/job_tasks"), std::string::npos) << cgroup_of(daemon);
  cgroups_->release(7, "job_tasks");
  EXPECT_TRUE(eventually_dead(daemon));
}

TEST_F(TaskCgroupsTest, ARestartedAgentClearsWhatItsPredecessorLeft) {
  auto dir = cgroups_->create(9, "job_tasks");
  ASSERT_TRUE(dir);
  const pid_t daemon = start_escaper(*dir);
  ASSERT_GT(daemon, 0);
  const std::string root = cgroups_->root();
  // Same agent id and state directory: the same root, as after a crash.
  auto again = TaskCgroups::open(*loop_, "auto", "node[0-1]", state_.str());
  ASSERT_TRUE(again && *again);
  EXPECT_EQ((*again)->root(), root);
  EXPECT_EQ((*again)->clear_leftovers(), 1u);
  EXPECT_TRUE(eventually_dead(daemon));
  ASSERT_TRUE(test::run_loop_until(*loop_, [&] { return (*again)->draining() == 0; }));
  EXPECT_FALSE(fs::exists(root + "/job_9"));
}

TEST_F(TaskCgroupsTest, OtherAgentsGetTheirOwnRoot) {
  test::TempDir other_state{"corral-cgroups"};
  auto other = TaskCgroups::open(*loop_, "auto", "node[0-1]", other_state.str());
  ASSERT_TRUE(other && *other);
  EXPECT_NE((*other)->root(), cgroups_->root());
  EXPECT_EQ(fs::path(cgroups_->root()).filename().string().rfind("corral-node_0-1_-", 0), 0u) << cgroups_->root();
}

// The limits below need their controller in some hierarchy here (v2, or v1 on hybrid
// machines like this one's CI); each test says so when it skips.
class TaskCgroupsLimitsTest : public TaskCgroupsTest {
 protected:
  bool lacks(const std::string& controller) const { return cgroups_->missing().find(controller) != std::string::npos; }
  struct Ran {
    std::string out;
    int status = -1;
    uint64_t oom_kills = 0;  // the job's, read before its cgroup goes
  };
  // Runs `script` as a task of job `jobid`, then releases the task's cgroup.
  Ran run(uint64_t jobid, const std::string& script) {
    auto dir = cgroups_->create(jobid, "job_tasks");
    EXPECT_TRUE(dir) << dir.message();
    if (!dir) return {};
    SpawnRequest r = escaping_task();
    r.cgroups = *dir;
    r.argv = {"/bin/sh", "-c", script};
    auto p = spawn_process(r);
    EXPECT_TRUE(p) << p.message();
    if (!p) return {};
    std::string out;
    char buf[4096];
    for (pollfd pf{p->stdout_pipe.get(), POLLIN, 0}; ::poll(&pf, 1, 20000) > 0;) {  // the pipe does not block
      const ssize_t n = ::read(pf.fd, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    int st = 0;
    ::waitpid(p->pid, &st, 0);
    const uint64_t kills = cgroups_->oom_kills(jobid);
    cgroups_->release(jobid, "job_tasks");
    return {out, st, kills};
  }
};

TEST_F(TaskCgroupsLimitsTest, ATaskPastItsMemoryIsKilledAndCounted) {
  if (lacks("memory")) GTEST_SKIP() << cgroups_->missing();
  ASSERT_TRUE(cgroups_->limit_job(11, {.memory_bytes = 64 << 20, .pids = 0, .cpus = {}}));
  EXPECT_EQ(cgroups_->oom_kills(11), 0u);
  // tail keeps a line it has not finished in memory: /dev/zero has no newline.
  auto big = run(11, "head -c 400000000 /dev/zero | tail -n 1 >/dev/null; echo survived $?");
  EXPECT_GE(big.oom_kills, 1u);
  EXPECT_NE(big.out.find("survived 137"), std::string::npos) << big.out;  // tail got SIGKILL
  // Within the limit nothing is killed.
  ASSERT_TRUE(cgroups_->limit_job(12, {.memory_bytes = 64 << 20, .pids = 0, .cpus = {}}));
  auto small = run(12, "head -c 1000000 /dev/zero | tail -n 1 >/dev/null; echo survived $?");
  EXPECT_NE(small.out.find("survived 0"), std::string::npos) << small.out;
  EXPECT_EQ(small.oom_kills, 0u);
}

// A hierarchy of its own for a limit controller (v1 beside v2) holds a job's units only
// when the job has that limit: otherwise every unit cost a directory made, joined by each
// task and removed there for nothing. A job with the limit is held to it (the test above).
TEST_F(TaskCgroupsLimitsTest, AJobIsOnlyInTheHierarchiesOfItsLimits) {
  auto plain = cgroups_->create(31, "job_tasks");
  ASSERT_TRUE(plain) << plain.message();
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_EQ(plain->front(), cgroups_->root() + "/job_31/job_tasks");
  cgroups_->release(31, "job_tasks");
  if (lacks("pids")) GTEST_SKIP() << cgroups_->missing();
  // The task's own view: with a pids limit it is in job_32 of every hierarchy that has
  // the pids controller, and of the first.
  ASSERT_TRUE(cgroups_->limit_job(32, {.memory_bytes = 0, .pids = 100, .cpus = {}}));
  auto ran = run(32, "cat /proc/self/cgroup");
  bool in_pids = false;
  for (std::string_view line : {std::string_view(ran.out)}) {
    for (size_t at = 0; at < line.size();) {
      const size_t end = std::min(line.find('\n', at), line.size());
      const std::string_view l = line.substr(at, end - at);
      const bool pids_line = l.find(":pids:") != std::string_view::npos || l.rfind("0::", 0) == 0;
      if (pids_line && l.find("/job_32/job_tasks") != std::string_view::npos) in_pids = true;
      at = end + 1;
    }
  }
  EXPECT_TRUE(in_pids) << ran.out;
}

TEST_F(TaskCgroupsLimitsTest, OomKillsInReusedStepSlotsAreCountedOnce) {
  if (lacks("memory")) GTEST_SKIP() << cgroups_->missing();
  ASSERT_TRUE(cgroups_->limit_job(16, {.memory_bytes = 64 << 20, .pids = 0, .cpus = {}}));
  cgroups_->open_job(16);
  ASSERT_TRUE(cgroups_->create(16, "job_tasks"));
  auto step = [&](const std::string& unit, const std::string& script) {
    auto dir = cgroups_->create(16, unit);
    ASSERT_TRUE(dir) << dir.message();
    SpawnRequest r = escaping_task();
    r.cgroups = *dir;
    r.argv = {"/bin/sh", "-c", script};
    auto p = spawn_process(r);
    ASSERT_TRUE(p) << p.message();
    int st = 0;
    ::waitpid(p->pid, &st, 0);
    cgroups_->release(16, unit);
  };
  step("step_0-1", "true");
  step("step_1-2", "head -c 400000000 /dev/zero | tail -n 1 >/dev/null");  // in step_0-1's slot
  const uint64_t kills = cgroups_->oom_kills(16);
  EXPECT_GE(kills, 1u);
  step("step_2-3", "true");
  step("step_3-4", "true");
  EXPECT_EQ(cgroups_->oom_kills(16), kills);
  cgroups_->release(16, "job_tasks");
}

TEST_F(TaskCgroupsLimitsTest, AJobCannotForkPastItsPidsLimit) {
  if (lacks("pids")) GTEST_SKIP() << cgroups_->missing();
  ASSERT_TRUE(cgroups_->limit_job(13, {.memory_bytes = 0, .pids = 8, .cpus = {}}));
  // Each background sleep is a process; the shell prints one line per sleep the kernel let
  // it start, and gives up ("Cannot fork") at the limit.
  const std::string forks = "for i in $(seq 20); do sleep 5 >/dev/null 2>&1 & echo $i; done";
  auto limited = run(13, forks);
  const auto lines = std::count(limited.out.begin(), limited.out.end(), '\n');
  EXPECT_GE(lines, 1) << limited.out;
  EXPECT_LT(lines, 8) << limited.out;
  EXPECT_NE(limited.status, 0);
  auto free = run(14, forks);
  EXPECT_EQ(std::count(free.out.begin(), free.out.end(), '\n'), 20) << free.out;
}

TEST_F(TaskCgroupsLimitsTest, AJobRunsOnlyOnItsCpus) {
  if (lacks("cpuset")) GTEST_SKIP() << cgroups_->missing();
  ASSERT_TRUE(cgroups_->limit_job(15, {.memory_bytes = 0, .pids = 0, .cpus = {0}}));
  auto pinned = run(15, "grep Cpus_allowed_list /proc/self/status");
  EXPECT_NE(pinned.out.find("Cpus_allowed_list:\t0\n"), std::string::npos) << pinned.out;
}

TEST(TaskCgroupsSetting, NoneIsOffAndABadDirectoryIsRefused) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop);
  std::string why;
  auto none = TaskCgroups::open(**loop, "none", "n1", "/tmp", &why);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  EXPECT_NE(why.find("turned off"), std::string::npos);

  test::TempDir plain;
  auto bad = TaskCgroups::open(**loop, plain.str(), "n1", "/tmp");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find(plain.str() + " is not in a cgroup v2 hierarchy"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace corral::node
