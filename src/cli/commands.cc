#include "cli/commands.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace corral::cli {

void fail(std::string_view cmd, std::string_view message, int code) {
  fmt::print(stderr, "corral {}: {}\n", cmd, message);
  throw CLI::RuntimeError(code);
}

void fail_rpc(std::string_view cmd, const Error& err) {
  if (err.code == Errc::unavailable) {
    fmt::print(stderr, "corral: {}\n", err.message);
    throw CLI::RuntimeError(kExitFailure);
  }
  fail(cmd, err.message);
}

void fail_rpc_now(std::string_view cmd, const Error& err) {
  if (err.code == Errc::unavailable)
    fmt::print(stderr, "corral: {}\n", err.message);
  else
    fmt::print(stderr, "corral {}: {}\n", cmd, err.message);
  exit_now(kExitFailure);
}

void exit_now(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void usage_error(std::string_view cmd, std::string_view message) {
  fmt::print(stderr, "corral {}: {}\nRun 'corral {} --help' for more information.\n", cmd, message, cmd);
  throw CLI::RuntimeError(kExitUsage);
}

}  // namespace corral::cli
