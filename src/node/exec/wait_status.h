// Wait statuses the agent makes up for tasks that never ran or were lost, in the form
// waitpid reports them, and which signals end a process.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <string>

namespace corral::node {

// "exited with `code`".
inline int exit_status(int code) { return code << 8; }

// "killed by signal `sig`".
inline int signalled_status(int sig) { return sig & 0x7f; }

// "exit code 3" or "killed by signal 11", for messages.
inline std::string describe_wait_status(int ws) {
  if (WIFSIGNALED(ws)) return "killed by signal " + std::to_string(WTERMSIG(ws));
  return "exit code " + std::to_string(WEXITSTATUS(ws));
}

// Whether a signal's default action ends a process: such a signal ends what has no
// process to receive it (an alloc job's tasks, a step that has not started).
inline bool terminating(int sig) {
  switch (sig) {
    case 0:
    case SIGCHLD:
    case SIGCONT:
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
    case SIGURG:
    case SIGWINCH:
      return false;
    default:
      return true;
  }
}

}  // namespace corral::node
