#include "node/exec/spawn_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "node/exec/cpu_binding.h"
#include "node/exec/output_pattern.h"
#include "node/exec/spawn_actions.h"
#include "node/exec/task_env.h"
#include "util/write_all.h"

namespace corral::node {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// The node, not the task, ran out of something: worth trying again shortly.
bool exhausted(int err) { return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM; }

Error spawn_error(int err, std::string what) {
  std::string msg = std::move(what) + ": " + errno_text(err);
  return exhausted(err) ? Error{Errc::unavailable, std::move(msg)} : io_error(std::move(msg));
}

// Only a missing command is "not found" (exit 127); a missing cwd or file is 126.
Error exec_error(int err, const std::string& command) {
  std::string msg = "cannot execute '" + command + "': " + errno_text(err);
  if (exhausted(err)) return {Errc::unavailable, std::move(msg)};
  return err == ENOENT ? not_found(std::move(msg)) : io_error(std::move(msg));
}

// Open files are never inherited by accident: everything here is O_CLOEXEC and only the
// spawn file actions (dup2) give the child its 0/1/2.
Result<UniqueFd> open_file(const std::string& path, int flags, const char* what) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC, 0644));
  if (!fd.valid()) return spawn_error(errno, std::string("cannot open ") + what + " '" + path + "'");
  return fd;
}

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return spawn_error(errno, "cannot create a pipe");
  Pipe p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  ::fcntl(p.read.get(), F_SETFL, O_NONBLOCK);
  return p;
}

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env) {
    if (env_names(kv, key)) return kv.substr(key.size() + 1);
  }
  return {};
}

bool is_executable_file(const std::string& path, int& err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    err = errno;
    return false;
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    err = EACCES;
    return false;
  }
  return true;
}

// RAII wrappers so every exit path destroys the spawn objects.
struct PosixActions {
  posix_spawn_file_actions_t fa;
  explicit PosixActions(const SpawnActions& actions) {
    posix_spawn_file_actions_init(&fa);
    for (const auto& a : actions.list) {
      switch (a.kind) {
        case SpawnActions::Kind::dup2:
          posix_spawn_file_actions_adddup2(&fa, a.fd, a.target);
          break;
        case SpawnActions::Kind::open:
          posix_spawn_file_actions_addopen(&fa, a.target, a.path.c_str(), a.flags, 0);
          break;
        case SpawnActions::Kind::chdir:
          posix_spawn_file_actions_addchdir_np(&fa, a.path.c_str());
          break;
      }
    }
  }
  ~PosixActions() { posix_spawn_file_actions_destroy(&fa); }
  PosixActions(const PosixActions&) = delete;
  PosixActions& operator=(const PosixActions&) = delete;
};
struct SpawnAttr {
  posix_spawnattr_t attr;
  // A new session (for a terminal) also makes a new process group; asking for both would
  // fail, as a session leader cannot change its group.
  explicit SpawnAttr(bool new_session) {
    posix_spawnattr_init(&attr);
    // Own process group, so one killpg reaches the task's whole tree; signal state
    // reset because the agent blocks SIGCHLD/SIGTERM/SIGINT and ignores SIGPIPE.
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &all);
    short group = new_session ? POSIX_SPAWN_SETSID : POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setflags(&attr, static_cast<short>(group | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
  }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};

// execve's arrays are char* const[] for C's sake; nothing writes through them.
std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// A file action the child could not carry out, as the parent's checks word it.
Error action_error(int err, const SpawnActions::Action& a) {
  switch (a.kind) {
    case SpawnActions::Kind::chdir:
      return spawn_error(err, "cannot change directory to '" + a.path + "'");
    case SpawnActions::Kind::open:
      return spawn_error(err, "cannot open '" + a.path + "'");
    case SpawnActions::Kind::dup2:
      break;
  }
  return spawn_error(err, "cannot give the task descriptor " + std::to_string(a.target));
}

// With a cgroup or CPUs to bind to, the process is set up before it runs any code of
// its own (spawn_child); otherwise posix_spawn.
Result<pid_t> do_spawn(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, const SpawnActions& actions, bool new_session,
                       const ChildSetup& setup = {}) {
  auto cargv = c_strings(argv);
  auto cenv = c_strings(env);
  pid_t pid = -1;
  if (setup.any()) {
    SpawnFailure f = spawn_child(pid, path, cargv.data(), cenv.data(), actions, new_session, setup);
    switch (f.stage) {
      case SpawnFailure::Stage::cgroup:
        return spawn_error(f.err, "cannot move the task into cgroup " + setup.cgroups.at(f.cgroup));
      case SpawnFailure::Stage::cpus:
        return spawn_error(f.err, "cannot bind the task to CPUs " + cpu_list_text(setup.cpus));
      case SpawnFailure::Stage::rlimits:
        return spawn_error(f.err, "cannot set the task's resource limits");
      case SpawnFailure::Stage::action:
        return action_error(f.err, actions.list.at(f.action));
      case SpawnFailure::Stage::exec:
        break;
    }
    if (f.err != 0) return exec_error(f.err, argv[0]);
    return pid;
  }
  SpawnAttr attr(new_session);
  PosixActions fa(actions);
  int rc = ::posix_spawn(&pid, path.c_str(), &fa.fa, &attr.attr, cargv.data(), cenv.data());
  if (rc != 0) return exec_error(rc, argv[0]);
  return pid;
}

// Where stdout and stderr go: a file opened here, or the write end of a capture pipe.
struct Outputs {
  UniqueFd out, err;  // what the child gets as 1 and 2
  SpawnedProcess proc;
};

// One output stream: the named file, or a pipe whose read end the agent keeps.
Status open_stream(const std::string& path, const char* what, UniqueFd& child_end, UniqueFd& read_end) {
  if (!path.empty()) {
    auto f = open_file(path, O_WRONLY | O_CREAT | O_APPEND, what);
    if (!f) return f.error();
    child_end = std::move(*f);
    return {};
  }
  auto p = make_pipe();
  if (!p) return p.error();
  child_end = std::move(p->write);
  read_end = std::move(p->read);
  return {};
}

Result<Outputs> open_outputs(const SpawnRequest& req) {
  Outputs o;
  if (auto st = open_stream(req.output_path, "output file", o.out, o.proc.stdout_pipe); !st) return st.error();
  if (req.merge_stderr || (!req.error_path.empty() && req.error_path == req.output_path)) {
    o.err = UniqueFd(::fcntl(o.out.get(), F_DUPFD_CLOEXEC, 0));
  } else if (auto st = open_stream(req.error_path, "error file", o.err, o.proc.stderr_pipe); !st) {
    return st.error();
  }
  return o;
}

// What could not be written is reported in the job's exit or eventlog too.
void write_text(int fd, const std::string& text) { (void)write_all(fd, text); }

void write_message(int fd, const std::string& msg) { write_text(fd, msg + "\n"); }

int entry_fd(const SpawnRequest& req) { return req.cgroup_entry ? req.cgroup_entry->get() : -1; }

// What the task's own child sets up before it execs (spawn_child).
ChildSetup task_setup(const SpawnRequest& req, std::optional<int> nice) {
  return {req.cgroups, req.cpus, req.rlimits, nice, entry_fd(req)};
}

// Refused before anything is opened: a stdio number would be overwritten by the task's
// own stdio, and a closed one would make the spawn fail with a less useful message.
Status check_inherit_fds(const std::vector<int>& fds) {
  for (int fd : fds) {
    std::string what = "cannot pass descriptor " + std::to_string(fd) + " to the task: ";
    if (fd >= 0 && fd <= STDERR_FILENO)
      return invalid(what + "descriptors 0-2 are the task's standard streams (use the input/output/error paths)");
    if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return invalid(what + "it is not an open descriptor of the agent");
  }
  return {};
}

// dup2 onto the same number is a no-op for the kernel, but posix_spawn (glibc >= 2.29,
// POSIX 2024) then clears FD_CLOEXEC in the child, which is all an inherited fd needs.
// Added after every other action, so none of them can land on these numbers later.
void add_inherited(SpawnActions& actions, const std::vector<int>& fds) {
  for (int fd : fds) actions.dup2(fd, fd);
}

Result<SpawnedProcess> spawn_direct(const SpawnRequest& req, std::optional<int> nice) {
  auto outs = open_outputs(req);
  if (!outs) return outs.error();
  if (!req.stderr_note.empty() && !req.error_path.empty() && !req.merge_stderr)
    write_text(outs->err.get(), req.stderr_note);
  auto fail = [&](Error e) -> Result<SpawnedProcess> {
    // A spawn that will be tried again (unavailable) leaves the user's file alone.
    if (!req.error_path.empty() && !req.merge_stderr && e.code != Errc::unavailable)
      write_message(outs->err.get(), e.message);
    return e;
  };
  const ChildSetup setup = task_setup(req, nice);
  // spawn_child's child says itself which step failed (a missing directory, a program that
  // cannot run): nothing to look up first, unless a PATH search needs it.
  const bool child_reports = setup.any();
  if (!req.cwd.empty() && !child_reports) {
    struct stat st {};
    if (::stat(req.cwd.c_str(), &st) != 0)
      return fail(spawn_error(errno, "cannot change directory to '" + req.cwd + "'"));
    if (!S_ISDIR(st.st_mode)) return fail(spawn_error(ENOTDIR, "cannot change directory to '" + req.cwd + "'"));
  }
  UniqueFd in;
  if (req.stdin_fd < 0) {
    auto f = open_file(req.input_path.empty() ? "/dev/null" : req.input_path, O_RDONLY, "input file");
    if (!f) return fail(f.error());
    in = std::move(*f);
  }
  const std::string& command = req.argv.at(0);
  auto exe = child_reports && command.find('/') != std::string::npos
                 ? Result<std::string>(resolve_path(command, req.cwd))
                 : find_executable(command, req.env, req.cwd);
  if (!exe) return fail(exe.error());

  SpawnActions actions;
  actions.dup2(in.valid() ? in.get() : req.stdin_fd, STDIN_FILENO);
  actions.dup2(outs->out.get(), STDOUT_FILENO);
  actions.dup2(outs->err.get(), STDERR_FILENO);
  add_inherited(actions, req.inherit_fds);
  if (!req.cwd.empty()) actions.chdir(req.cwd);
  auto pid = do_spawn(*exe, req.argv, req.env, actions, false, setup);
  if (!pid) return fail(pid.error());
  outs->proc.pid = *pid;
  return std::move(outs->proc);
}

// The task leads a new session; opening the terminal there (without O_NOCTTY) makes it
// the session's controlling terminal, so job control and ^C work as in a login.
Result<SpawnedProcess> spawn_on_terminal(const SpawnRequest& req, std::optional<int> nice) {
  if (!req.cwd.empty()) {
    struct stat st {};
    if (::stat(req.cwd.c_str(), &st) != 0) return spawn_error(errno, "cannot change directory to '" + req.cwd + "'");
    if (!S_ISDIR(st.st_mode)) return spawn_error(ENOTDIR, "cannot change directory to '" + req.cwd + "'");
  }
  auto exe = find_executable(req.argv.at(0), req.env, req.cwd);
  if (!exe) return exe.error();
  SpawnActions actions;
  actions.open(STDIN_FILENO, req.terminal, O_RDWR);
  actions.dup2(STDIN_FILENO, STDOUT_FILENO);
  actions.dup2(STDIN_FILENO, STDERR_FILENO);
  add_inherited(actions, req.inherit_fds);
  if (!req.cwd.empty()) actions.chdir(req.cwd);
  auto pid = do_spawn(*exe, req.argv, req.env, actions, true, task_setup(req, nice));
  if (!pid) return pid.error();
  SpawnedProcess proc;
  proc.pid = *pid;
  return proc;
}

Result<UniqueFd> text_memfd(const char* name, const std::string& data, const char* what) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd.valid()) return spawn_error(errno, std::string("cannot create ") + what);
  if (!write_all(fd.get(), data)) return spawn_error(errno, std::string("cannot write ") + what);
  return fd;
}

Result<UniqueFd> environment_memfd(const std::vector<std::string>& env) {
  std::string data;
  for (const auto& kv : env) {
    data += kv;
    data += '\0';
  }
  return text_memfd("corral-task-env", data, "the task environment");
}

// Moves a descriptor above the range corral-imp's file actions write to (0-4), so the
// dup2 sequence below can never overwrite a source before it is used.
UniqueFd high_fd_of(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 10)); }
UniqueFd high_fd(const UniqueFd& fd) { return high_fd_of(fd.get()); }

// corral-imp's environment and status descriptors sit at 3 and 4 unless the task
// inherits those numbers; then the next free ones, never a number still to be read from.
int imp_fd_slot(int from, const std::vector<int>& taken) {
  int fd = from;
  while (std::find(taken.begin(), taken.end(), fd) != taken.end()) ++fd;
  return fd;
}

Result<SpawnedProcess> spawn_via_imp(const SpawnRequest& req, std::optional<int> nice) {
  SpawnedProcess proc;
  const bool tty = !req.terminal.empty();
  UniqueFd in =
      req.stdin_fd >= 0 && !tty ? high_fd_of(req.stdin_fd) : UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd out, err;
  if (tty) {
    out = UniqueFd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    err = UniqueFd(::fcntl(out.get(), F_DUPFD_CLOEXEC, 0));
  } else if (req.output_path.empty()) {
    auto p = make_pipe();
    if (!p) return p.error();
    out = std::move(p->write);
    proc.stdout_pipe = std::move(p->read);
  } else {
    out = UniqueFd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  }
  if (req.error_path.empty() && !req.merge_stderr) {
    auto p = make_pipe();
    if (!p) return p.error();
    err = std::move(p->write);
    proc.stderr_pipe = std::move(p->read);
  } else if (!tty) {
    err = UniqueFd(::fcntl(out.get(), F_DUPFD_CLOEXEC, 0));
  }
  auto envfd = environment_memfd(req.env);
  if (!envfd) return envfd.error();
  auto status = make_pipe();
  if (!status) return status.error();
  UniqueFd env_high = high_fd(*envfd), status_high = high_fd(status->write);
  UniqueFd note_high;
  if (!req.stderr_note.empty() && !req.error_path.empty() && !tty) {
    auto notefd = text_memfd("corral-job-notes", req.stderr_note, "the job's notes");
    if (!notefd) return notefd.error();
    note_high = high_fd(*notefd);
  }
  std::vector<int> taken = req.inherit_fds;
  taken.insert(taken.end(), {env_high.get(), status_high.get(), note_high.get()});
  const int env_slot = imp_fd_slot(3, taken);
  taken.push_back(env_slot);
  const int status_slot = imp_fd_slot(env_slot + 1, taken);
  taken.push_back(status_slot);
  const int note_slot = note_high.valid() ? imp_fd_slot(status_slot + 1, taken) : -1;

  std::vector<std::string> argv = {req.imp_path, "--uid", std::to_string(req.uid), "--gid", std::to_string(req.gid)};
  if (!req.cwd.empty()) argv.insert(argv.end(), {"--cwd", req.cwd});
  if (!req.cpus.empty()) argv.insert(argv.end(), {"--cpus", cpu_list_text(req.cpus)});
  for (const auto& l : req.rlimits)
    argv.insert(argv.end(), {"--rlimit", std::to_string(l.resource) + "=" + std::to_string(l.value)});
  if (tty) {
    // corral-imp leads the new session, so its open of the terminal as stdin makes it the
    // controlling terminal; the task inherits both through exec.
    argv.insert(argv.end(), {"--stdin", req.terminal, "--stdout", req.terminal, "--stderr", req.terminal});
  } else {
    // An absent --stdin keeps the pipe given as descriptor 0.
    if (req.stdin_fd < 0) argv.insert(argv.end(), {"--stdin", req.input_path.empty() ? "/dev/null" : req.input_path});
    if (!req.output_path.empty()) argv.insert(argv.end(), {"--stdout", req.output_path});
    if (!req.error_path.empty())
      argv.insert(argv.end(), {"--stderr", req.error_path});
    else if (req.merge_stderr && !req.output_path.empty())
      argv.insert(argv.end(), {"--stderr", req.output_path});
  }
  argv.insert(argv.end(), {"--env-fd", std::to_string(env_slot), "--status-fd", std::to_string(status_slot)});
  if (note_slot >= 0) argv.insert(argv.end(), {"--note-fd", std::to_string(note_slot)});
  for (int fd : req.inherit_fds) argv.insert(argv.end(), {"--keep-fd", std::to_string(fd)});
  argv.push_back("--");
  argv.insert(argv.end(), req.argv.begin(), req.argv.end());

  SpawnActions actions;
  actions.dup2(in.get(), STDIN_FILENO);
  actions.dup2(out.get(), STDOUT_FILENO);
  actions.dup2(err.get(), STDERR_FILENO);
  actions.dup2(env_high.get(), env_slot);
  actions.dup2(status_high.get(), status_slot);
  if (note_slot >= 0) actions.dup2(note_high.get(), note_slot);
  // corral-imp closes everything but these (--keep-fd), so they reach the task.
  add_inherited(actions, req.inherit_fds);
  // The helper runs as root: its own environment is fixed, never the user's. It starts
  // inside the task's cgroups, as a task spawned directly does.
  auto pid = do_spawn(req.imp_path, argv, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, actions, tty,
                      {req.cgroups, {}, {}, nice, entry_fd(req)});
  if (!pid) return pid.error();
  proc.pid = *pid;
  proc.status_pipe = std::move(status->read);
  return proc;
}

}  // namespace

int spawn_failure_code(const Error& e) { return e.code == Errc::not_found ? 127 : 126; }

Result<std::string> find_executable(const std::string& command, const std::vector<std::string>& env,
                                    const std::string& cwd) {
  if (command.empty()) return not_found("cannot execute '': empty command");
  int err = ENOENT;
  if (command.find('/') != std::string::npos) {
    std::string path = resolve_path(command, cwd);
    if (is_executable_file(path, err)) return path;
    return exec_error(err, command);
  }
  std::string path_var = env_value(env, "PATH");
  if (path_var.empty()) path_var = "/usr/local/bin:/usr/bin:/bin";
  int first_err = ENOENT;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    std::string candidate = resolve_path((dir.empty() ? "." : dir) + "/" + command, cwd);
    if (is_executable_file(candidate, err)) return candidate;
    if (err == EACCES) first_err = EACCES;  // like execvp: report EACCES if seen anywhere
    start = end + 1;
  }
  return exec_error(first_err, command);
}

Result<SpawnedProcess> spawn_process(const SpawnRequest& req, std::optional<int> nice) {
  if (req.argv.empty() || req.argv[0].empty()) return not_found("cannot execute: empty command");
  if (auto st = check_inherit_fds(req.inherit_fds); !st) return st.error();
  if (!req.imp_path.empty()) return spawn_via_imp(req, nice);
  return req.terminal.empty() ? spawn_direct(req, nice) : spawn_on_terminal(req, nice);
}

}  // namespace corral::node
