#include "node/exec/spawn_actions.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "util/unique_fd.h"

namespace corral::node {

namespace {

// The child of vfork shares the agent's memory and stack until it execs: only system
// calls here, no allocation, no locks, nothing that could touch the agent's state.
int apply(const SpawnActions::Action& a) {
  switch (a.kind) {
    case SpawnActions::Kind::dup2:
      if (a.fd == a.target) return ::fcntl(a.fd, F_SETFD, 0) == 0 ? 0 : errno;
      return ::dup2(a.fd, a.target) >= 0 ? 0 : errno;
    case SpawnActions::Kind::open: {
      int fd = ::open(a.path.c_str(), a.flags | O_CLOEXEC, 0);
      if (fd < 0) return errno;
      if (fd == a.target) return ::fcntl(fd, F_SETFD, 0) == 0 ? 0 : errno;
      int rc = ::dup2(fd, a.target) >= 0 ? 0 : errno;
      ::close(fd);
      return rc;
    }
    case SpawnActions::Kind::chdir:
      return ::chdir(a.path.c_str()) == 0 ? 0 : errno;
  }
  return EINVAL;
}

// Everything the child needs, prepared by the parent: the child must not allocate.
struct Prepared {
  const std::string& path;
  char* const* argv;
  char* const* envp;
  const SpawnActions& actions;
  bool new_session;
  const std::vector<const char*>& procs;  // the cgroup.procs files to join
  size_t first_join;                      // 1: the child was created in the first one
  const cpu_set_t* cpus;                  // null: no binding
  const std::vector<job::TaskRlimit>& rlimits;
  const std::optional<int>& nice;
  // Where a child that cannot exec says why: the parent's memory, which the child shares
  // until it execs, read once vfork returns (no pipe to make, read and close per spawn).
  SpawnFailure* report;
};

// A soft limit, never above the hard one (which only root could raise, and not for tasks).
int set_soft_limit(const job::TaskRlimit& l) {
  rlimit lim{};
  if (::getrlimit(l.resource, &lim) != 0) return errno;
  rlim_t want = l.value < 0 ? RLIM_INFINITY : static_cast<rlim_t>(l.value);
  lim.rlim_cur = lim.rlim_max != RLIM_INFINITY && (want == RLIM_INFINITY || want > lim.rlim_max) ? lim.rlim_max : want;
  return ::setrlimit(l.resource, &lim) == 0 ? 0 : errno;
}

SpawnFailure join_and_bind(const Prepared& p) {
  for (size_t i = p.first_join; i < p.procs.size(); ++i) {
    int fd = ::open(p.procs[i], O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && ::write(fd, "0", 1) == 1;
    int err = errno == 0 ? EIO : errno;
    if (fd >= 0) ::close(fd);
    if (!ok) return {err, SpawnFailure::Stage::cgroup, i};
  }
  if (p.cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), p.cpus) != 0)
    return {errno, SpawnFailure::Stage::cpus};
  for (const auto& l : p.rlimits)
    if (int err = set_soft_limit(l); err != 0) return {err, SpawnFailure::Stage::rlimits};
  // Back to the priority tasks start with (the agent's loop runs above them); lowering
  // one's own priority cannot fail.
  if (p.nice) ::setpriority(PRIO_PROCESS, 0, *p.nice);
  return {};
}

[[noreturn]] void child(const Prepared& p) {
  SpawnFailure failed = join_and_bind(p);
  int err = failed.err;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; err == 0 && sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // fails only for reserved ones
  if (err == 0 && (p.new_session ? ::setsid() : ::setpgid(0, 0)) < 0) err = errno;
  for (size_t i = 0; err == 0 && i < p.actions.list.size(); ++i) {
    err = apply(p.actions.list[i]);
    if (err != 0 && failed.err == 0) failed = {err, SpawnFailure::Stage::action, 0, i};
  }
  if (err == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(p.path.c_str(), p.argv, p.envp);
    err = errno;
  }
  if (failed.err == 0) failed.err = err;
  *p.report = failed;
  ::_exit(127);
}

#if defined(__x86_64__)
int clone_child(void* prepared) { child(*static_cast<const Prepared*>(prepared)); }

// clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP): vfork's child, created inside the
// cgroup (v2) `cgroup_fd` names. Joining by a write to cgroup.procs instead made every
// spawn 80-100 us longer on a cgroup v2 node (bench/steps/launch_floor.cc), all of it
// with the agent's loop waiting. The child starts on `stack` (this frame's, which the
// waiting parent does not touch) and must never return into the parent's frames, so it is
// called from the assembly and exits there. -1 (errno set): the kernel cannot (before
// 5.7, or a v1 hierarchy); the caller then forks the usual way.
pid_t clone_into_cgroup(int cgroup_fd, const Prepared& prepared, char* stack, size_t stack_size) {
  clone_args args{};
  args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack);
  args.stack_size = stack_size;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  int (*fn)(void*) = clone_child;
  const void* arg = &prepared;
  long ret = SYS_clone3;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "movq %[arg], %%rdi\n\t"
      "callq *%[fn]\n\t"
      "ud2\n\t"
      "1:\n\t"
      : "+a"(ret)
      : "D"(&args), "S"(sizeof args), [fn] "r"(fn), [arg] "r"(arg)
      : "rcx", "r11", "memory");
  if (ret < 0) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return static_cast<pid_t>(ret);
}
#endif

}  // namespace

SpawnFailure spawn_child(pid_t& pid, const std::string& path, char* const argv[], char* const envp[],
                         const SpawnActions& actions, bool new_session, const ChildSetup& setup) {
  std::vector<std::string> procs;
  for (const auto& dir : setup.cgroups) procs.push_back(dir + "/cgroup.procs");
  std::vector<const char*> proc_files;
  for (const auto& f : procs) proc_files.push_back(f.c_str());
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : setup.cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &cpus);
  SpawnFailure failed;
  Prepared prepared{path,          argv,       envp,   actions,
                    new_session,   proc_files, 0,      setup.cpus.empty() ? nullptr : &cpus,
                    setup.rlimits, setup.nice, &failed};
  // No handler of the agent may run in the child before it resets them (as glibc does).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid = -1;
#if defined(__x86_64__)
  // The first cgroup is the v2 one (TaskCgroups): entered by the kernel as it creates the
  // child. The child's few system calls need little stack.
  alignas(64) char stack[32 * 1024];
  UniqueFd opened;
  int into = setup.cgroup_fd;
  if (into < 0 && !setup.cgroups.empty()) {
    opened.reset(::open(setup.cgroups[0].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    into = opened.get();
  }
  if (into >= 0) {
    prepared.first_join = 1;
    pid = clone_into_cgroup(into, prepared, stack, sizeof stack);
    if (pid < 0) prepared.first_join = 0;
  }
#endif
  if (pid < 0) pid = ::vfork();
  if (pid == 0) child(prepared);
  const int vfork_err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  // vfork returns when the child has exec'd (its memory is its own) or exited: a child
  // that failed wrote `failed` before _exit; untouched, the exec went ahead.
  if (pid < 0) failed = {vfork_err};
  if (pid > 0 && failed.err != 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  }
  return failed;
}

}  // namespace corral::node
