// corrald: the corral controller.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include <grpcpp/server_builder.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "ctld/agent_service.h"
#include "ctld/agent_socket.h"
#include "ctld/config.h"
#include "ctld/controller.h"
#include "ctld/hooks/registry.h"
#include "ctld/rpc_service.h"
#include "ctld/rpc_socket.h"
#include "ctld/rpc_socket_calls.h"
#include "net/agent_frames.h"
#include "net/credentials.h"
#include "net/message_limits.h"
#include "net/peer_listener.h"
#include "net/rpc_frames.h"
#include "net/tls.h"
#include "util/fd_hygiene.h"
#include "util/stop_signals.h"

namespace {

using corral::io_error;
using corral::Status;

struct Options {
  std::string config;
  std::vector<std::string> sets;
  std::string socket, state_dir, log_file, log_level = "info";
};

// corrald's own directory: hooks' node commands are installed beside it.
std::string program_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

void setup_logging(const Options& o) {
  if (!o.log_file.empty()) spdlog::set_default_logger(spdlog::basic_logger_mt("corrald", o.log_file));
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  spdlog::flush_on(spdlog::level::info);
}

// The state directory holds the job database (every user's environment and scripts) and
// the cluster key: corrald's own user alone may read it. A socket inside it must stay
// reachable, so then the directory is 0711 (enter, not list); the files stay 0600.
Status make_private_state_dir(const std::string& dir, const std::string& socket) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create state directory " + dir + ": " + ec.message());
  auto parent = std::filesystem::path(socket).parent_path();
  bool socket_inside = std::filesystem::equivalent(parent, dir, ec);
  if (::chmod(dir.c_str(), socket_inside ? 0711 : 0700) != 0)
    return io_error("cannot make state directory " + dir + " private: " + std::strerror(errno));
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().filename().string().rfind("corral.db", 0) == 0)
      ::chmod(entry.path().c_str(), 0600);  // written by an older corrald under a looser umask
  }
  return {};
}

// Requests over TCP are only as good as their credentials: make sure one can be made and
// checked before serving (munged answers; the cluster key is there and private).
corral::Result<std::unique_ptr<corral::net::Credentials>> tcp_credentials(const corral::ctld::Config& cfg) {
  using namespace corral;
  const net::AuthConfig auth{cfg.auth, cfg.munge_socket, cfg.key_file, {}};
  auto creds = net::make_credentials(auth);
  const std::string need = cfg.auth == net::AuthMethod::munge
                               ? "controller.listen needs munged"
                               : "controller.listen with auth = \"cluster-key\" needs the cluster key";
  if (!creds) return Error{creds.error().code, need + ": " + creds.message()};
  auto probe = (*creds)->encode(net::kRequestPayload);
  auto back = probe ? (*creds)->decode(*probe, net::kRequestPayload, nullptr) : Result<net::Identity>(probe.error());
  if (!back) return Error{back.error().code, need + ": " + back.message()};
  return creds;
}

int run(const Options& o) {
  using namespace corral;
  std::vector<std::string> sets = o.sets;
  if (!o.socket.empty()) sets.push_back("controller.socket=\"" + o.socket + "\"");
  if (!o.state_dir.empty()) sets.push_back("controller.state-dir=\"" + o.state_dir + "\"");
  auto cfg = ctld::load_config(o.config, sets, ctld::hook_sections());
  if (!cfg) {
    std::cerr << "corrald: " << cfg.message() << "\n";
    return 2;
  }
  auto hooks = ctld::make_hooks(*cfg, hook::HookSetup{program_dir()});
  if (!hooks) {
    std::cerr << "corrald: " << hooks.message() << "\n";
    return 2;
  }
  if (auto st = make_private_state_dir(cfg->state_dir, cfg->socket); !st) {
    std::cerr << "corrald: " << st.message() << "\n";
    return 1;
  }
  std::error_code ec;
  store::StoreOptions so;
  so.synchronous_full = cfg->sync_full;
  so.commit_interval = cfg->commit_interval;
  auto store = store::Store::open(cfg->state_dir + "/corral.db", so);
  if (!store) {
    std::cerr << "corrald: " << store.message() << "\n";
    return 1;
  }
  ctld::Controller ctl(*cfg, std::move(*store));
  for (auto& h : *hooks) ctl.add_hook(std::move(h));
  if (auto st = ctl.start(); !st.ok()) {
    std::cerr << "corrald: " << st.message() << "\n";
    return 1;
  }
  // Every user connects to the socket: a directory made for it here is 0755, not 0700.
  if (auto sockdir = std::filesystem::path(cfg->socket).parent_path();
      !sockdir.empty() && std::filesystem::create_directories(sockdir, ec))
    ::chmod(sockdir.c_str(), 0755);
  auto listener = net::PeerListener::open(cfg->socket, raise_fd_limit());
  if (!listener) {
    std::cerr << "corrald: " << listener.message() << "\n";
    return 1;
  }
  std::unique_ptr<net::Credentials> creds;
  if (!cfg->listen.empty()) {
    auto made = tcp_credentials(*cfg);
    if (!made) {
      std::cerr << "corrald: " << made.message() << "\n";
      return 1;
    }
    creds = std::move(*made);
  }
  const ctld::CallerIdentity callers(**listener, creds.get());
  ctld::RpcService service(ctl, callers);
  ctld::AgentService agents(ctl, callers);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.RegisterService(&agents);
  std::vector<int> ports(cfg->listen.size(), 0);
  const net::TlsServerFiles tls{cfg->tls_cert, cfg->tls_key};
  auto server_creds = net::server_credentials(tls, "controller.tls-cert/tls-key");
  if (!server_creds) {
    std::cerr << "corrald: " << server_creds.message() << "\n";
    return 1;
  }
  for (size_t i = 0; i < cfg->listen.size(); ++i) builder.AddListeningPort(cfg->listen[i], *server_creds, &ports[i]);
  // Explicit limits (net/message_limits.h): the largest client request or agent message.
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::max(net::kMaxClientRequest, net::kMaxAgentUpMessage)));
  builder.SetMaxSendMessageSize(static_cast<int>(net::kMaxClientReply));
  // gRPC aborts a server connection whose sent data stays unacknowledged for the keepalive
  // timeout (TCP_USER_TIMEOUT, 20s unless set). An agent cut off that long is not lost:
  // its nodes wait for node-timeout, or isolation-timeout when most agents are silent
  // (check_heartbeats), and the controller closes the link itself then.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(1000 * std::max(cfg->node_timeout, cfg->isolation_timeout) + 10000));
  auto server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "corrald: cannot start the gRPC server\n";
    return 1;
  }
  for (size_t i = 0; i < cfg->listen.size(); ++i) {
    if (ports[i] == 0) {
      std::cerr << "corrald: cannot listen on " << cfg->listen[i] << " (controller.listen)\n";
      return 1;
    }
    spdlog::info("corrald listening on {} (TCP{}, {} credentials)", cfg->listen[i], tls.enabled() ? ", TLS" : "",
                 creds->name());
  }
  // The command's calls without gRPC (net/rpc_frames.h), same limits as gRPC's.
  ctld::RpcSocketServer::Limits rpc_limits;
  rpc_limits.max_request = net::kMaxClientRequest;
  rpc_limits.max_answer = net::kMaxClientReply;
  auto rpc_socket = ctld::RpcSocketServer::start(
      [&ctl](const ctld::Caller& c, net::RpcMethod m, std::string_view request, std::string* reply) {
        return ctld::call_controller(ctl, c, m, request, reply);
      },
      [&ctl](const ctld::Caller& c, std::string_view request, ctld::WatchSink& sink) {
        return ctld::watch_controller(ctl, c, request, sink);
      },
      rpc_limits);
  if (!rpc_socket) {
    std::cerr << "corrald: " << rpc_socket.message() << "\n";
    return 1;
  }
  (*listener)->divert(std::string(net::kRpcPreface), [to = rpc_socket->get()](UniqueFd fd, const net::PeerCred& c) {
    to->adopt(std::move(fd), ctld::Caller{c.uid, c.gid});
  });
  // Local agents' streams without gRPC (net/agent_frames.h); over TCP they use AgentService.
  auto agent_socket = std::make_unique<ctld::AgentSocketServer>(ctl);
  (*listener)->divert(std::string(net::kAgentPreface), [to = agent_socket.get()](UniqueFd fd, const net::PeerCred& c) {
    to->adopt(std::move(fd), ctld::Caller{c.uid, c.gid});
  });
  (*listener)->start(server.get());
  spdlog::info("corrald {} listening on {} (state in {})", CORRAL_VERSION, cfg->socket, cfg->state_dir);

  // Wait for SIGTERM/SIGINT or a Shutdown request.
  std::mutex mu;
  std::condition_variable cv;
  bool quit = false;
  ctl.set_shutdown_handler([&] {
    std::lock_guard lk(mu);
    quit = true;
    cv.notify_all();
  });
  std::thread sig_thread([&] {
    corral::wait_for_stop_signal();
    std::lock_guard lk(mu);
    quit = true;
    cv.notify_all();
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return quit; });
  }
  spdlog::info("corrald stopping");
  (*listener)->stop();
  rpc_socket->reset();
  ctl.stop();
  agent_socket.reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  pthread_kill(sig_thread.native_handle(), SIGTERM);
  sig_thread.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals in every thread; a dedicated thread waits for them.
  corral::block_stop_signals();

  Options o;
  CLI::App app{
      "corrald: the corral controller. It owns the job queue, the scheduler, the node "
      "inventory and the persistent state, and serves clients and node agents on a "
      "Unix socket."};
  app.add_option("-c,--config", o.config, "TOML configuration file (see docs/admin.md)")->check(CLI::ExistingFile);
  app.add_option("--set", o.sets, "Override a configuration key: section.key=value (repeatable)");
  app.add_option("--socket", o.socket, "Unix socket to listen on (controller.socket)");
  app.add_option("--state-dir", o.state_dir, "Directory of the state database (controller.state-dir)");
  app.add_option("--log-file", o.log_file, "Log to this file instead of stderr");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);
  // Whatever corrald creates (the database, its journal, the log) is its own alone.
  ::umask(077);
  setup_logging(o);
  return run(o);
}
