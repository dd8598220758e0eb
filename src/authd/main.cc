// corral-authd: signs cluster-key credentials for the local users of a host, on sites that
// authenticate with corral's cluster key instead of MUNGE (docs/admin.md "Authentication").
// It plays munged's part: it alone on the host (with the daemons) reads the key, and it
// vouches for a caller's uid and gid as the kernel gives them.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "authd/sign_server.h"
#include "job/hmac_key.h"
#include "net/cluster_key_auth.h"
#include "net/credentials.h"
#include "util/fd_hygiene.h"
#include "util/stop_signals.h"

namespace {

struct Options {
  std::string key_file = "/etc/corral/cluster.key";
  std::string socket = std::string(corral::net::kDefaultAuthdSocket);
  std::string log_file, log_level = "info";
};

int fail(const std::string& msg) {
  std::cerr << "corral-authd: " << msg << "\n";
  return 1;
}

// Ends `server` at SIGTERM or SIGINT (blocked in every thread; this one waits for them).
std::thread stop_on_signal(corral::authd::SignServer& server) {
  return std::thread([&server] {
    corral::wait_for_stop_signal();
    server.stop();
  });
}

int run(const Options& o) {
  using namespace corral;
  auto key = job::load_key_file(o.key_file);
  if (!key) return fail("--key-file: " + key.message());
  // Every local user connects: a directory made for the socket is 0755.
  std::error_code ec;
  if (auto dir = std::filesystem::path(o.socket).parent_path();
      !dir.empty() && std::filesystem::create_directories(dir, ec))
    ::chmod(dir.c_str(), 0755);
  raise_fd_limit();
  const std::string origin = net::this_host_origin();
  if (origin.empty())
    spdlog::warn(
        "this host's name resolves to no IPv4 address: credentials will name no origin host, and "
        "corrald will let no agent on this host register nodes");
  auto server = authd::SignServer::open(o.socket, std::move(*key), origin);
  if (!server) return fail("--socket: " + server.message());
  spdlog::info("corral-authd {} signing on {} for host {}", CORRAL_VERSION, o.socket,
               origin.empty() ? "(no address)" : origin);
  std::thread signals = stop_on_signal(**server);
  (*server)->run();
  pthread_kill(signals.native_handle(), SIGTERM);  // run() may also end on an error
  signals.join();
  spdlog::info("corral-authd stopping");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  corral::block_stop_signals();

  Options o;
  CLI::App app{
      "corral-authd: signs cluster-key credentials for this host's users, on sites that authenticate\n"
      "with corral's cluster key instead of MUNGE ([controller] auth = \"cluster-key\"). Local processes\n"
      "ask it over its Unix socket; the credential names the uid and gid the kernel gives for the\n"
      "connection, this host's address, and lives 60 seconds. Run it on every host where users run\n"
      "corral commands (login and compute hosts), as root or a user that alone can read the key."};
  app.add_option("--key-file", o.key_file, "The cluster key (hex, mode 0600), the same file as corrald's")
      ->capture_default_str();
  app.add_option("--socket", o.socket, "The Unix socket to serve (clients: CORRAL_AUTH_SOCKET)")->capture_default_str();
  app.add_option("--log-file", o.log_file, "Log to this file instead of stderr");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::umask(022);
  if (!o.log_file.empty()) spdlog::set_default_logger(spdlog::basic_logger_mt("corral-authd", o.log_file));
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  spdlog::flush_on(spdlog::level::from_str(o.log_level));  // every line written: a quiet log
  corral::cloexec_from(3);
  return run(o);
}
