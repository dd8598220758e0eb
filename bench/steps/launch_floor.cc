// corral-launch-floor: what the parts of a step's launch cost on this machine, without
// corral, so that a step's time above the floor can be split into what the kernel charges
// for each part and what is corral's own. Prints JSON: the median, in microseconds, of
//   (keys end in _us)
//   spawn_posix        posix_spawn + waitpid of /bin/true (bench/steps' floor)
//   spawn_vfork_signals vfork, every signal set back to its default, exec, waitpid: what
//                      the agent's child does about signals (node/exec/spawn_child.cc)
//   spawn_fork_join    clone3(CLONE_VFORK), the child writes its cgroup.procs, exec
//   spawn_fork_into    clone3(CLONE_VFORK | CLONE_INTO_CGROUP) into the same cgroup, exec
//   unix_round_trip    one byte there and back between two processes over a socketpair:
//                      a request and its answer, the two hand-offs a step adds to a spawn
// The two cgroup figures need root and a cgroup v2 hierarchy at /sys/fs/cgroup (or
// /sys/fs/cgroup/unified beside v1); null otherwise. The cgroup made for them is removed.
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double median_us(int count, const std::function<bool()>& once) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto t0 = Clock::now();
    if (!once()) return -1;
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

char kTrue[] = "/bin/true";
char* const kArgv[] = {kTrue, nullptr};

bool reap(pid_t pid) {
  int st = 0;
  return pid > 0 && ::waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

bool spawn_posix() {
  pid_t pid = 0;
  return ::posix_spawn(&pid, kTrue, nullptr, nullptr, kArgv, environ) == 0 && reap(pid);
}

bool spawn_vfork_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    ::execve(kTrue, kArgv, environ);
    ::_exit(127);
  }
  return reap(pid);
}

pid_t clone3_vfork(int cgroup_fd) {
  clone_args args{};
  args.flags = CLONE_VFORK;
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

bool spawn_fork_join(const std::string& procs) {
  const pid_t pid = clone3_vfork(-1);
  if (pid == 0) {
    const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(126);
    ::close(fd);
    ::execve(kTrue, kArgv, environ);
    ::_exit(127);
  }
  return reap(pid);
}

bool spawn_fork_into(int cgroup_fd) {
  const pid_t pid = clone3_vfork(cgroup_fd);
  if (pid == 0) {
    ::execve(kTrue, kArgv, environ);
    ::_exit(127);
  }
  return reap(pid);
}

// The parent writes a byte, the child echoes it; both block in read between.
double unix_round_trip(int count) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sv[0]);
    char c;
    while (::read(sv[1], &c, 1) == 1)
      if (::write(sv[1], &c, 1) != 1) break;
    ::_exit(0);
  }
  ::close(sv[1]);
  const double us = median_us(count, [&] {
    char c = 'x';
    return ::write(sv[0], &c, 1) == 1 && ::read(sv[0], &c, 1) == 1;
  });
  ::close(sv[0]);
  ::waitpid(pid, nullptr, 0);
  return us;
}

std::string json_number(double v) { return v < 0 ? "null" : std::to_string(v); }

// Each figure is the median of four block medians, the blocks of all the ways taken in
// turn, so that none gets the machine's quieter moments.
std::vector<double> interleaved(int count, const std::vector<std::function<bool()>>& ways) {
  std::vector<std::vector<double>> blocks(ways.size());
  for (int round = 0; round < 4; ++round)
    for (size_t w = 0; w < ways.size(); ++w) blocks[w].push_back(median_us(std::max(1, count / 4), ways[w]));
  std::vector<double> out;
  for (auto& b : blocks) {
    std::sort(b.begin(), b.end());
    out.push_back(b.front() < 0 ? -1 : (b[1] + b[2]) / 2);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::max(40, std::atoi(argv[1])) : 2000;
  std::vector<std::function<bool()>> ways = {spawn_posix, spawn_vfork_signals};
  // cgroup v2 alone, or its hierarchy beside v1's (a hybrid host).
  const std::string root =
      ::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
  const std::string cgroup = root + "/corral-launch-floor-" + std::to_string(::getpid());
  int dir = -1;
  if (::geteuid() == 0 && ::mkdir(cgroup.c_str(), 0700) == 0)
    dir = ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ways.emplace_back([&] { return spawn_fork_join(cgroup + "/cgroup.procs"); });
    ways.emplace_back([&] { return spawn_fork_into(dir); });
  }
  const std::vector<double> us = interleaved(count, ways);
  if (dir >= 0) ::close(dir);
  ::rmdir(cgroup.c_str());
  const double rtt = unix_round_trip(count);
  std::printf(
      "{\"count\": %d, \"spawn_posix_us\": %s, \"spawn_vfork_signals_us\": %s, \"spawn_fork_join_us\": %s, "
      "\"spawn_fork_into_us\": %s, \"unix_round_trip_us\": %s}\n",
      count, json_number(us[0]).c_str(), json_number(us[1]).c_str(), json_number(dir >= 0 ? us[2] : -1).c_str(),
      json_number(dir >= 0 ? us[3] : -1).c_str(), json_number(rtt).c_str());
  return 0;
}
