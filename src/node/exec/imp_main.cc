// corral-imp: started by a root corral-node to run one task as the job's user. It
// drops every privilege (supplementary groups, gid, uid) first and only then touches
// the user's files, so they are opened with the user's rights and owned by the user.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "imp_args.h"  // same directory: corral-imp has no include path

namespace {

using corral::node::ImpArgs;

int g_status_fd = -1;  // set once before anything can fail after parsing

[[noreturn]] void fail(int code, const std::string& what, int err) {
  std::string msg = what;
  if (err != 0) msg += std::string(": ") + std::strerror(err);
  std::string line = "corral-imp: " + msg + "\n";
  if (::write(STDERR_FILENO, line.data(), line.size()) < 0) {
    // nowhere else to report it; the status pipe below still carries the message
  }
  if (g_status_fd >= 0 && ::write(g_status_fd, msg.data(), msg.size()) < 0) {
    // the agent is gone; the exit code still says what happened
  }
  std::_Exit(code);
}

std::string read_all(int fd, const char* what) {
  std::string data;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(126, std::string("cannot read ") + what, errno);
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    off += n;
  }
  ::close(fd);
  return data;
}

std::vector<std::string> read_environment(int fd) {
  const std::string data = read_all(fd, "the task environment");
  std::vector<std::string> env;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\0', start);
    if (end == std::string::npos) end = data.size();
    if (end > start) env.emplace_back(data, start, end - start);
    start = end + 1;
  }
  return env;
}

void bind_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) fail(126, "cannot bind the task to its CPUs", errno);
}

void drop_privileges(uid_t uid, gid_t gid) {
  struct passwd* pw = ::getpwuid(uid);
  if (pw != nullptr) {
    if (::initgroups(pw->pw_name, gid) != 0) fail(126, "initgroups for uid " + std::to_string(uid), errno);
  } else if (::setgroups(1, &gid) != 0) {
    fail(126, "setgroups", errno);
  }
  if (::setgid(gid) != 0) fail(126, "setgid " + std::to_string(gid), errno);
  if (::setuid(uid) != 0) fail(126, "setuid " + std::to_string(uid), errno);
  if (::geteuid() != uid || ::getuid() != uid || ::getegid() != gid || ::getgid() != gid)
    fail(126, "identity change to uid " + std::to_string(uid) + " did not take effect", 0);
  if (uid != 0 && ::setuid(0) == 0) fail(126, "root privileges could be regained after setuid", 0);
}

// As the user: a soft limit no higher than the hard one, which the user cannot raise.
void set_limits(const std::vector<std::pair<int, long long>>& limits) {
  for (const auto& [resource, value] : limits) {
    rlimit lim{};
    if (::getrlimit(resource, &lim) != 0) fail(126, "getrlimit " + std::to_string(resource), errno);
    rlim_t want = value < 0 ? RLIM_INFINITY : static_cast<rlim_t>(value);
    lim.rlim_cur =
        lim.rlim_max != RLIM_INFINITY && (want == RLIM_INFINITY || want > lim.rlim_max) ? lim.rlim_max : want;
    if (::setrlimit(resource, &lim) != 0) fail(126, "cannot set resource limit " + std::to_string(resource), errno);
  }
}

void open_onto(const std::string& path, int flags, int target, const char* what) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) fail(126, std::string("cannot open ") + what + " '" + path + "'", errno);
  if (::dup2(fd, target) < 0) fail(126, std::string("dup2 ") + what, errno);
  ::close(fd);
}

void setup_stdio(const ImpArgs& a) {
  const int out_flags = O_WRONLY | O_CREAT | O_APPEND;
  if (a.stdin_path) open_onto(*a.stdin_path, O_RDONLY, STDIN_FILENO, "input file");
  if (a.stdout_path) open_onto(*a.stdout_path, out_flags, STDOUT_FILENO, "output file");
  if (a.stderr_path) {
    if (a.stdout_path && *a.stderr_path == *a.stdout_path) {
      if (::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) fail(126, "dup2 error file", errno);
    } else {
      open_onto(*a.stderr_path, out_flags, STDERR_FILENO, "error file");
    }
  }
}

// Nothing the agent had open reaches the task except the descriptors it names.
void close_the_rest(const std::vector<int>& keep) {
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    // Kernels before 5.11: one descriptor at a time, as far as the limit reaches.
    rlimit lim{};
    const int top =
        ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (1u << 20) ? static_cast<int>(lim.rlim_cur) : (1 << 20);
    for (int fd = 3; fd < top; ++fd) {
      int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && (flags & FD_CLOEXEC) == 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)
        fail(126, "cannot close inherited descriptor " + std::to_string(fd), errno);
    }
  }
  for (int fd : keep) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0)
      fail(126, "descriptor " + std::to_string(fd), errno);
  }
}

void write_note(const std::string& note) {
  size_t off = 0;
  while (off < note.size()) {
    ssize_t n = ::write(STDERR_FILENO, note.data() + off, note.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the task still runs; the notes are also in the job's eventlog
    off += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ImpArgs a;
  if (auto err = corral::node::parse_imp_args(args, a)) fail(126, "usage: " + *err, 0);
  if (a.status_fd >= 0) {
    if (::fcntl(a.status_fd, F_SETFD, FD_CLOEXEC) != 0) fail(126, "status descriptor", errno);
    g_status_fd = a.status_fd;
  }
  if (::geteuid() != 0) fail(126, "must be started as root", 0);

  std::vector<std::string> env;
  if (a.env_fd >= 0) env = read_environment(a.env_fd);
  std::string note;
  if (a.note_fd >= 0) note = read_all(a.note_fd, "the job's notes");
  close_the_rest(a.keep_fds);

  if (!a.cpus.empty()) bind_cpus(a.cpus);
  drop_privileges(static_cast<uid_t>(a.uid), static_cast<gid_t>(a.gid));
  set_limits(a.rlimits);
  if (!a.cwd.empty() && ::chdir(a.cwd.c_str()) != 0) fail(126, "cannot change directory to '" + a.cwd + "'", errno);
  setup_stdio(a);
  write_note(note);

  if (::clearenv() != 0) fail(126, "clearenv", 0);
  for (auto& kv : env) {
    if (kv.find('=') != std::string::npos && ::putenv(kv.data()) != 0) fail(126, "putenv", errno);
  }
  std::vector<char*> cargv;
  for (auto& s : a.command) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  int err = errno;
  fail(err == ENOENT ? 127 : 126, "cannot execute '" + a.command[0] + "'", err);
}
