#include "cli/commands.h"

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace corral::cli {

void fail(std::string_view cmd, std::string_view message, int code) {
  fmt::print(stderr, "corral {}: {}\n", cmd, message);
  throw CLI::RuntimeError(code);
}

void exit_now(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void usage_error(std::string_view cmd, std::string_view message) {
  fmt::print(stderr, "corral {}: {}\nRun 'corral {} --help' for more information.\n", cmd,
             message, cmd);
  throw CLI::RuntimeError(kExitUsage);
}

}  // namespace corral::cli
