#include "node/spawn_actions.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

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

[[noreturn]] void child(const std::string& path, char* const argv[], char* const envp[], const SpawnActions& actions,
                        bool new_session, const char* procs, int report) {
  SpawnFailure failed;
  int fd = ::open(procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, "0", 1) != 1) failed = {errno == 0 ? EIO : errno, true};
  if (fd >= 0) ::close(fd);
  int err = failed.err;
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; err == 0 && sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // fails only for reserved ones
  if (err == 0 && (new_session ? ::setsid() : ::setpgid(0, 0)) < 0) err = errno;
  for (const auto& a : actions.list) {
    if (err != 0) break;
    err = apply(a);
  }
  if (err == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(path.c_str(), argv, envp);
    err = errno;
  }
  if (!failed.in_cgroup) failed.err = err;
  if (::write(report, &failed, sizeof failed) < 0) {
    // the parent then sees no report and the exit code 127
  }
  ::_exit(127);
}

}  // namespace

SpawnFailure spawn_in_cgroup(pid_t& pid, const std::string& path, char* const argv[], char* const envp[],
                             const SpawnActions& actions, bool new_session, const std::string& cgroup) {
  const std::string procs = cgroup + "/cgroup.procs";
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return {errno, false};
  // No handler of the agent may run in the child before it resets them (as glibc does).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  pid = ::vfork();
  if (pid == 0) child(path, argv, envp, actions, new_session, procs.c_str(), report[1]);
  const int vfork_err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(report[1]);
  SpawnFailure failed;
  if (pid < 0) failed.err = vfork_err;
  // The child wrote its failure before _exit, or exec closed the pipe: no waiting here.
  else if (::read(report[0], &failed, sizeof failed) != static_cast<ssize_t>(sizeof failed)) failed = {};
  ::close(report[0]);
  if (pid > 0 && failed.err != 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
  return failed;
}

}  // namespace corral::node
