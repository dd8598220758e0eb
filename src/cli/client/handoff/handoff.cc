// grpc_channel.h for the `corral` command, which links no gRPC: where it would open a
// channel it runs corral-grpc instead, in the same process, with the arguments it was
// started with. Nothing was changed before that point (the controller calls before it were
// reads, or none), so the command simply starts over with gRPC at hand.
#include "cli/client/grpc_channel.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "net/unix_connect.h"

namespace corral::cli {

namespace {

// The arguments the process was started with.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return args;
}

// corral-grpc beside this program (the build tree), else where it is installed relative to
// it (CORRAL_GRPC_RELATIVE: the libexec directory from the bin directory).
std::string grpc_program() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "corral-grpc";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/') + 1);
  for (const std::string& candidate : {dir + "corral-grpc", dir + CORRAL_GRPC_RELATIVE "/corral-grpc"})
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  return dir + CORRAL_GRPC_RELATIVE "/corral-grpc";
}

// Replaces this process with corral-grpc; returns only when that cannot be done, saying why.
Error run_grpc_program(std::string_view why) {
  if (std::getenv(kHandedOffEnv) != nullptr)
    return Error{Errc::internal, fmt::format("{} needs gRPC, and this corral-grpc was built without it", why)};
  const std::string program = grpc_program();
  std::vector<std::string> args = own_arguments();
  if (args.empty()) return Error{Errc::internal, "cannot read this command's arguments from /proc/self/cmdline"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  // corral-grpc sets up its own signal handling: it starts with nothing blocked.
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  ::setenv(kHandedOffEnv, "1", 1);
  ::execv(program.c_str(), argv.data());
  const int err = errno;
  ::unsetenv(kHandedOffEnv);
  return Error{Errc::unavailable,
               fmt::format("{} needs gRPC, and {} could not be started: {}", why, program, std::strerror(err))};
}

}  // namespace

Result<std::shared_ptr<GrpcChannel>> open_grpc_channel(const std::string& target, bool, const Unreachable&) {
  return run_grpc_program(fmt::format("a call to {}", target));
}

void hand_off_before(std::string_view command, const std::string& uri) {
  // The error, if any, comes again from the first channel this command opens.
  if (command == "alloc" || !net::own_protocol_socket(uri, "CORRAL_RPC_TRANSPORT"))
    (void)run_grpc_program(fmt::format("corral {}", command));
}

}  // namespace corral::cli
