// Running helper programs from tests: where tests/data is, a command's exit status, and
// reading what a started process prints.
#pragma once

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace corral::test {

// tests/data, or $CORRAL_TEST_DATA.
inline std::filesystem::path test_data_dir() {
  if (const char* d = std::getenv("CORRAL_TEST_DATA")) return d;
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data";
}

// Runs argv (looked up in PATH), waits, returns its exit code (128+N if killed by signal
// N, -1 if it could not start).
inline int run_command(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The next line a process writes to `fd` (without the newline); what came before EOF, or
// before 5 s passed without output.
inline std::string read_line(int fd) {
  std::string line;
  char c = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0 || ::read(fd, &c, 1) != 1 || c == '\n') return line;
    line += c;
  }
}

}  // namespace corral::test
