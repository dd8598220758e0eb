// Running one step from the terminal: the step's output to our stdout/stderr as it
// streams, our stdin to its rank 0, Ctrl-C/SIGTERM/SIGHUP to its tasks, window size
// changes to its terminal, and its exit code at the end. Shared by `corral run` inside an
// allocation and `corral alloc`.
#pragma once

#include <signal.h>
#include <termios.h>

#include <string>

#include "cli/client/step_client.h"

namespace corral::cli {

// SIGINT, SIGTERM, SIGHUP and SIGWINCH arrive through a signalfd so a helper thread can
// turn them into messages on the stream. Make it before any gRPC channel exists so gRPC's
// threads inherit the blocked mask.
class StepSignals {
 public:
  StepSignals();
  ~StepSignals();
  StepSignals(const StepSignals&) = delete;
  StepSignals& operator=(const StepSignals&) = delete;

  // The next signal within timeout_ms (-1: no limit), or 0 (timeout or wake()).
  int wait(int timeout_ms) const;
  // Ends a wait() in progress and every later one: the step is over.
  void wake() const;

 private:
  int fd_ = -1;
  int wake_fd_ = -1;
  sigset_t old_{};
};

// The terminal on fd 0 in raw mode while this lives (a pty step: the remote terminal
// interprets Ctrl-C and line editing). Restored on every exit path by the destructor.
class RawTerminal {
 public:
  RawTerminal();  // does nothing unless fd 0 is a terminal
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  bool active_ = false;
  termios saved_{};
};

struct AttachOptions {
  std::string cmd = "run";  // in messages: "corral run: ..."
  bool label = false;       // "RANK: " before each line
  bool verbose = false;
  bool pty = false;  // raw terminal, window sizes, no labels
  bool forward_stdin = true;
};

struct StepOutcome {
  int exit_code = 1;     // for our process: the step's, 1 if it failed to start
  bool started = false;  // the step manager created the step
};

// Runs `spec` on the step manager to its end. Failures to reach the step manager print
// the reason and return exit code 1.
StepOutcome attach_step(StepClient& client, const corral::v1::StepSpec& spec, const AttachOptions& opts,
                        const StepSignals& signals);

}  // namespace corral::cli
