// Starting one process (a task or a perilog script) with posix_spawn, directly or
// through corral-imp when it must run as another user.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/rlimit.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;               // empty: the agent's cwd
  std::string input_path;        // absolute; empty: /dev/null
  // >= 0: the task's stdin instead of input_path (the read end of a pipe the agent feeds).
  // The caller keeps ownership; the child gets a copy.
  int stdin_fd = -1;
  // Non-empty: a pseudo terminal's slave device (ptsname). It becomes the task's stdin,
  // stdout, stderr and controlling terminal, in a session of its own; input/output/error
  // paths and stdin_fd are then ignored and no pipes are made. Through corral-imp the
  // device is opened by the user, so the caller must have given it to them (fchown).
  std::string terminal;
  std::string output_path;    // absolute; empty: capture through a pipe
  std::string error_path;     // absolute; empty: capture through a pipe
  bool merge_stderr = false;  // stderr goes wherever stdout goes (perilogs)
  // Text put at the end of the error file before the task starts (the job's notes from
  // hooks). It is written through the descriptor opened for the task, so by corral-imp
  // as the user when the task runs as another user; ignored when stderr is captured.
  std::string stderr_note;
  // Open descriptors the task keeps at the same numbers (a PMI socket, say): only the
  // child's copies lose close-on-exec. Each must be >= 3, as 0-2 are the task's stdio;
  // every other descriptor of the agent stays out of the task.
  std::vector<int> inherit_fds;
  // Non-empty: start `imp_path` (corral-imp) as root, which becomes uid/gid and then
  // executes argv; files are then opened by the user, not by the agent.
  std::string imp_path;
  // The cgroup directories the process is moved into, one per hierarchy
  // (TaskCgroups::create); empty: none.
  std::vector<std::string> cgroups;
  // cgroups[0] already open (TaskCgroups::entry); null: it is opened for the spawn.
  std::shared_ptr<const UniqueFd> cgroup_entry;
  // Non-empty: the OS CPU numbers the process is bound to (cpus_of_cores).
  std::vector<int> cpus;
  // Soft resource limits set before exec (the submitter's, job/rlimit.h), each capped at
  // the hard limit the process has; empty: what the agent has.
  std::vector<job::TaskRlimit> rlimits;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct SpawnedProcess {
  pid_t pid = -1;
  UniqueFd stdout_pipe;  // read ends, non-blocking, when captured
  UniqueFd stderr_pipe;
  UniqueFd status_pipe;  // corral-imp's failure report (spawns through corral-imp only)
};

// Exit code a failed spawn is reported with: 127 when the command does not exist,
// 126 for every other failure (cwd, files, permissions), as shells do.
int spawn_failure_code(const Error& e);

// Errors are user-facing ("cannot execute 'foo': No such file or directory"); when the
// error file was already open the message has been written to it too. Errc::unavailable
// means the node ran out of descriptors, processes or memory (EMFILE, ENFILE, EAGAIN,
// ENOMEM): nothing was started and the same spawn may succeed a little later.
// `nice`: the scheduling priority the process starts with; unset: the calling thread's.
Result<SpawnedProcess> spawn_process(const SpawnRequest& req, std::optional<int> nice = {});

// Searches `command` like execvp would, in the PATH of `env`, relative entries and
// paths with a '/' taken relative to `cwd`. not_found / permission_denied errors.
Result<std::string> find_executable(const std::string& command, const std::vector<std::string>& env,
                                    const std::string& cwd);

}  // namespace corral::node
