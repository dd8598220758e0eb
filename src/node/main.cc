// corral-node: the node agent. Registers its node(s) with corrald over one
// long-lived agent stream (Agents.Stream) and runs what the controller asks: job tasks, signals,
// prolog / epilog / housekeeping scripts.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "job/hmac_key.h"
#include "net/credentials.h"
#include "net/peer_listener.h"
#include "net/step_frames.h"
#include "net/tls.h"
#include "node/agent.h"
#include "node/controller_link.h"
#include "node/exec/hardware.h"
#include "node/exec/task_supervisor.h"
#include "node/hooks/registry.h"
#include "node/orphans.h"
#include "node/state_lock.h"
#include "node/steps/step_service.h"
#include "node/steps/step_socket.h"
#include "util/event_loop.h"
#include "util/fd_hygiene.h"
#include "util/hostlist.h"
#include "util/stop_signals.h"
#include "util/unique_fd.h"
#include "util/units.h"

namespace {

using namespace corral;
using namespace corral::node;

struct Options {
  std::string controller;
  std::string nodes;
  std::string node_name;
  unsigned cores = 4;
  unsigned gpus = 0;
  std::string memory = "16GiB";
  std::string state_dir;
  std::string cgroups = "auto";
  uint64_t job_pids_max = 0;
  std::string output_spool = "16MiB";
  std::string cpu_bind = "cores";
  int loop_nice = -10;
  int spawn_threads = -1;  // -1: TaskSupervisor::default_spawn_helpers()
  std::string agent_id;
  std::string log_level = "info";
  std::string log_file;
  std::string listen;
  std::string tls_ca, tls_cert, tls_key;
  std::string key_file;
  std::string auth = "munge";
  std::string munge_socket;
};

constexpr int kMaxStepMessage = 64 << 20;  // a launch request names every node of a wide step

// Said on stderr, and in the log as well once there is a log file: an agent started by
// systemd or a test with --log-file must say there why it did not start.
int fail(const std::string& msg) {
  std::fprintf(stderr, "corral-node: %s\n", msg.c_str());
  auto logger = spdlog::get("corral-node");
  if (logger && !logger->sinks().empty() &&
      std::dynamic_pointer_cast<spdlog::sinks::basic_file_sink_mt>(logger->sinks().front())) {
    logger->critical("cannot start: {}", msg);
    logger->flush();
  }
  return 1;
}

Status setup_logging(const Options& o) {
  auto level = spdlog::level::from_str(o.log_level);
  if (level == spdlog::level::off && o.log_level != "off")
    return invalid("--log-level: unknown level '" + o.log_level + "' (trace, debug, info, warn, error, critical, off)");
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (!o.log_file.empty()) {
      // The log names users' commands and files: private, whatever the umask tasks inherit.
      const mode_t old = ::umask(077);
      logger = spdlog::basic_logger_mt("corral-node", o.log_file);
      ::umask(old);
    } else
      logger = spdlog::stderr_color_mt("corral-node");
  } catch (const spdlog::spdlog_ex& e) {
    return io_error("--log-file: " + std::string(e.what()));
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %n[%P] %l: %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return {};
}

Result<std::vector<NodeHardware>> configured_nodes(const Options& o) {
  if (o.nodes.empty()) {
    auto hw = discover_hardware();
    if (!hw) return hw.error();
    if (!o.node_name.empty()) {
      auto one = Hostlist::parse(o.node_name);
      if (!one || one->count() != 1 || one->hosts().front() != o.node_name)
        return invalid("--node-name: '" + o.node_name + "' is not one node name");
      hw->name = o.node_name;
    }
    return std::vector<NodeHardware>{*hw};
  }
  if (!o.node_name.empty()) return invalid("--node-name names a real node: it does not go with --nodes");
  auto hosts = Hostlist::parse(o.nodes);
  if (!hosts) return invalid("--nodes: " + hosts.message());
  if (hosts->empty()) return invalid("--nodes: the hostlist names no node");
  auto mem = parse_size(o.memory, 1024 * 1024);
  if (!mem) return invalid("--memory: " + mem.message());
  std::vector<NodeHardware> nodes;
  for (const auto& h : hosts->hosts()) nodes.push_back(NodeHardware{h, o.cores, o.gpus, *mem / (1024 * 1024), {}});
  return nodes;
}

std::string default_state_dir(const std::string& agent_id) {
  std::string safe = agent_id;
  for (char& c : safe)
    if (c == '/') c = '_';
  if (::geteuid() == 0) return "/var/lib/corral-node/" + safe;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/corral-node-" + std::to_string(::getuid()) +
         "/" + safe;
}

std::string imp_next_to_self() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "corral-imp";
  return (self.parent_path() / "corral-imp").string();
}

// Signals the event loop reads from a signalfd must be blocked before any thread
// (gRPC's included) starts, or one of those threads would swallow them.
void block_signals() {
  block_stop_signals();  // the event loop reads them, with SIGCHLD, from a signalfd
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Tasks get 0/1/2 through dup2; the agent's own must exist so pipes never land there.
void ensure_std_fds() {
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && ::open("/dev/null", O_RDWR) < 0) return;
}

// --listen as the address other agents and clients use: "unix:/abs/path" or host:port,
// with a wildcard host replaced by this host's name.
Result<std::string> step_address(const Options& o, const std::string& state_dir) {
  std::error_code ec;
  if (o.listen.empty()) return "unix:" + std::filesystem::absolute(state_dir, ec).string() + "/step.sock";
  if (o.listen.rfind("unix:", 0) == 0) {
    std::string path = o.listen.substr(5);
    if (path.empty()) return invalid("--listen: 'unix:' needs a socket path");
    return "unix:" + std::filesystem::absolute(path, ec).string();
  }
  auto colon = o.listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == o.listen.size() || o.listen.substr(colon + 1) == "0")
    return invalid("--listen: '" + o.listen + "' is neither unix:PATH nor HOST:PORT with a fixed port");
  std::string host = o.listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "*") {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return io_error("--listen: cannot read this host's name");
    host = name;
  }
  return host + o.listen.substr(colon);
}

// The StepService server: on a Unix socket through a PeerListener (callers known by
// SO_PEERCRED), or on a TCP port (callers known by the MUNGE credential of each request).
struct StepServer {
  std::unique_ptr<net::PeerListener> peers;
  std::unique_ptr<StepService> service;
  std::unique_ptr<StepSocketServer> socket;  // RunStep without gRPC on the Unix socket
  std::unique_ptr<grpc::Server> server;

  Status start(const std::string& address, const std::string& listen, const net::TlsServerFiles& tls, Agent& agent,
               EventLoop& loop) {
    grpc::ServerBuilder builder;
    if (address.rfind("unix:", 0) == 0) {
      auto l = net::PeerListener::open(address.substr(5), raise_fd_limit());
      if (!l) return invalid("--listen: " + l.message());
      peers = std::move(*l);
    } else {
      auto creds = net::server_credentials(tls, "--tls-cert/--tls-key");
      if (!creds) return creds.error();
      builder.AddListeningPort(listen, *creds);
    }
    service = std::make_unique<StepService>(loop, agent.steps(), agent.step_node(), agent.fences(), peers.get(),
                                            agent.config().credentials);
    builder.RegisterService(service->service());
    builder.SetMaxReceiveMessageSize(kMaxStepMessage);
    builder.SetMaxSendMessageSize(kMaxStepMessage);
    server = builder.BuildAndStart();
    if (!server) return io_error("--listen: cannot serve StepService on " + listen);
    if (peers) {
      socket = std::make_unique<StepSocketServer>(loop, agent.steps(), kMaxStepMessage);
      peers->divert(std::string(net::kStepPreface), [&loop, to = socket.get()](UniqueFd fd, const net::PeerCred& c) {
        loop.post([to, fd = fd.release(), uid = c.uid] { to->adopt(UniqueFd(fd), uid); });
      });
      peers->start(server.get());
    }
    return {};
  }

  void stop() {
    if (peers) peers->stop();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
};

}  // namespace

// Where libmunge (and so OpenPMIx's munge module) finds munged.
constexpr const char* kMungeDefaultSocket = "/run/munge/munge.socket.2";

int main(int argc, char** argv) {
  // Read by OpenPMIx when the agent's PMIx server starts (node/pmix), set before any
  // thread runs: job data stays in the server's memory and is served over each client's
  // socket, instead of shared-memory files that every local user could map.
  ::setenv("PMIX_MCA_gds", "hash", 1);
  Options o;
  CLI::App app{
      "corral-node: the corral node agent. Registers its nodes with the controller (corrald) and runs\n"
      "the jobs, signals and prolog/epilog scripts the controller sends."};
  app.add_option("--controller", o.controller, "The controller's address: unix:/path/to/corrald.sock or host:port")
      ->required();
  app.add_option("--nodes", o.nodes,
                 "Test mode: host all these virtual nodes (a hostlist such as node[1-16]) in this process, "
                 "each with --cores/--gpus/--memory. Without it the agent is one node named after the short "
                 "hostname, with the cores, memory and GPUs hwloc finds");
  app.add_option("--node-name", o.node_name,
                 "Name of this real node instead of the short hostname (as slurmd -N): for several agents "
                 "on one machine, or a node whose name is not its hostname. Over TCP the controller still "
                 "accepts it only if the name resolves to this host's address");
  app.add_option("--cores", o.cores, "Cores of each virtual node (with --nodes)")->capture_default_str();
  app.add_option("--gpus", o.gpus, "GPUs of each virtual node (with --nodes)")->capture_default_str();
  app.add_option("--memory", o.memory, "Memory of each virtual node (with --nodes), e.g. 16GiB; a bare number is MiB")
      ->capture_default_str();
  app.add_option("--state-dir", o.state_dir,
                 "Directory for per-job files such as batch scripts (default /var/lib/corral-node/ID as root, "
                 "$TMPDIR/corral-node-UID/ID otherwise)");
  app.add_option("--agent-id", o.agent_id, "Stable name of this agent (default: the hostlist of its nodes)");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, critical or off")->capture_default_str();
  app.add_option("--log-file", o.log_file, "Log to this file instead of stderr");
  // Each fabric or storage hook's own options (--cxi ...), under its name in --help.
  NodeHooks hooks = make_node_hooks();
  for (const auto& h : hooks.all())
    for (const auto& opt : h->options())
      app.add_option(opt.flag, *opt.value, opt.help)->capture_default_str()->group(std::string(h->name()) + " hook");
  app.add_option("--listen", o.listen,
                 "Where this agent serves step requests and launch trees: unix:/path/to.sock or host:port "
                 "(default unix:STATE_DIR/step.sock)");
  app.add_option("--cgroups", o.cgroups,
                 "Task containment: auto (a cgroup per job and per step under this process's cgroup v2 "
                 "directory, when it is writable; cgroup v1 where the machine has no v2), none (process "
                 "groups only), or a cgroup v2 directory to create them under. In a cgroup, what a task "
                 "leaves running (setsid, double fork) is killed when its job or step ends, and the job "
                 "is held to its --mem (memory.max: past it a task is killed and the job ends "
                 "OUT_OF_MEMORY), its cores (cpuset) and --job-pids-max")
      ->capture_default_str();
  app.add_option("--job-pids-max", o.job_pids_max,
                 "The most processes and threads one job may have at once on a node (pids.max of its "
                 "cgroup; 0: no limit). Stops a fork bomb from taking the node")
      ->capture_default_str();
  app.add_option("--output-spool", o.output_spool,
                 "Task output kept on disk (STATE_DIR/output.spool) while the controller is unreachable, "
                 "delivered when the link returns; past it, output is dropped and the job told how much. "
                 "At most 48MiB; 0: none")
      ->capture_default_str();
  app.add_option("--cpu-bind", o.cpu_bind,
                 "cores: tasks run only on the CPUs of the cores their job or step holds on the node "
                 "(real nodes; virtual --nodes have no CPUs of their own and are never bound); none: "
                 "tasks may run on any CPU")
      ->check(CLI::IsMember({"cores", "none"}))
      ->capture_default_str();
  app.add_option("--loop-nice", o.loop_nice,
                 "Scheduling priority (nice, -20 to 19) of the agent's event loop, which starts every task "
                 "and reads every exit: below the agent's own, launches are not kept waiting by the node's "
                 "busy tasks, which start at the agent's own priority. Needs root; 0 or more: as the agent")
      ->check(CLI::Range(-20, 19))
      ->capture_default_str();
  app.add_option("--spawn-threads", o.spawn_threads,
                 "Threads that start tasks beside the event loop: the tasks of launches that arrive together "
                 "(a wide step, concurrent steps) start side by side, each spawn waiting on its own thread for "
                 "its child's exec. Default: half the CPUs, at most 8; 0: the loop alone")
      ->check(CLI::Range(0, 64));
  app.add_option("--auth", o.auth,
                 "How this agent and the hosts it talks to over TCP know each other: munge (munged on every "
                 "host) or cluster-key (the cluster key, which --key-file names, signs; corral-authd signs "
                 "for users). The controller's [controller] auth must be the same")
      ->check(CLI::IsMember({"munge", "cluster-key"}))
      ->capture_default_str();
  app.add_option("--munge-socket", o.munge_socket,
                 "munged's socket, for the MUNGE credential that identifies this agent to a controller "
                 "reached over TCP (--controller HOST:PORT; default /run/munge/munge.socket.2)");
  app.add_option("--tls-ca", o.tls_ca,
                 "The site CA (PEM): connections to a controller or agent over TCP use TLS and accept only "
                 "servers whose certificate it signed for the name they are reached by");
  app.add_option("--tls-cert", o.tls_cert, "This agent's certificate (PEM): its --listen HOST:PORT serves TLS");
  app.add_option("--tls-key", o.tls_key, "The private key of --tls-cert (PEM, readable by root only)");
  app.add_option("--key-file", o.key_file,
                 "The cluster key file (hex, mode 0600) shared with corrald. Needed with --auth cluster-key; "
                 "with MUNGE it is not: the agent checks step credentials with the key of each job, which "
                 "the controller sends to the job's nodes (wrapped for this connection)");
  CLI11_PARSE(app, argc, argv);
  // PMIx clients (node/pmix) prove who they are with a MUNGE credential where munged runs
  // (munged takes the uid from the kernel), else with the library's native check; an
  // administrator's PMIX_MCA_psec is kept. Set before any thread starts.
  if (o.auth == "munge" && ::access(kMungeDefaultSocket, W_OK) == 0) ::setenv("PMIX_MCA_psec", "munge", 0);

  block_signals();
  ensure_std_fds();
  // Every captured task stream is a pipe: one agent hosting many virtual nodes needs more
  // descriptors than the usual soft limit of 1024.
  raise_fd_limit();
  if (auto st = setup_logging(o); !st) return fail(st.message());
  // The log file (a FILE* spdlog opened) and anything else inherited stay out of tasks.
  cloexec_from(3);
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    spdlog::warn("cannot become a child subreaper: orphaned task processes will not be reaped here");

  auto nodes = configured_nodes(o);
  if (!nodes) return fail(nodes.message());
  AgentConfig config;
  config.nodes = std::move(*nodes);
  if (o.agent_id.empty()) {
    Hostlist hl;
    for (const auto& n : config.nodes) hl.append(n.name);
    o.agent_id = hl.encode();
  }
  config.agent_id = o.agent_id;
  config.incarnation = fmt::format(
      "{}-{}", ::getpid(),
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  config.controller_uri = o.controller;
  config.state_dir = o.state_dir.empty() ? default_state_dir(o.agent_id) : o.state_dir;
  config.imp_path = imp_next_to_self();
  {
    std::error_code ec;
    if (auto st = hooks.start({std::filesystem::absolute(config.state_dir, ec).string()}); !st)
      return fail(st.message());
  }
  config.hooks = std::make_shared<const NodeHooks>(std::move(hooks));
  config.as_root = ::geteuid() == 0;
  config.cgroups = o.cgroups;
  config.job_pids_max = o.job_pids_max;
  auto spool = parse_size(o.output_spool, 1024 * 1024);
  if (!spool) return fail("--output-spool: " + spool.message());
  if (*spool > (48u << 20)) return fail("--output-spool: at most 48MiB (it goes in one message to the controller)");
  config.output_spool_max = *spool;
  if (o.auth == "cluster-key" && o.key_file.empty())
    return fail("--auth cluster-key needs --key-file (the cluster key, the same file as corrald's)");
  config.auth = *net::parse_auth_method(o.auth);
  auto creds = net::make_credentials(net::AuthConfig{config.auth, o.munge_socket, o.key_file, {}});
  if (!creds) return fail("--key-file: " + creds.message());
  config.credentials = std::move(*creds);
  if (auto ca = net::channel_credentials(o.tls_ca, "tcp-check"); !ca) return fail("--tls-ca: " + ca.message());
  config.tls_ca = o.tls_ca;
  config.cpu_bind = o.cpu_bind == "cores";
  config.loop_nice = o.loop_nice;
  config.spawn_helpers =
      o.spawn_threads < 0 ? TaskSupervisor::default_spawn_helpers() : static_cast<unsigned>(o.spawn_threads);
  config.local_job_pids_max = app.get_option("--job-pids-max")->count() > 0;
  config.local_cpu_bind = app.get_option("--cpu-bind")->count() > 0;
  std::error_code ec;
  std::filesystem::create_directories(config.state_dir, ec);
  if (ec) return fail("--state-dir: cannot create '" + config.state_dir + "': " + ec.message());
  // Users reach their batch scripts inside it, but may not list it or read its files.
  if (::chmod(config.state_dir.c_str(), 0711) != 0)
    return fail("--state-dir: cannot set the mode of '" + config.state_dir + "': " + std::strerror(errno));
  auto state_lock = lock_state_dir(config.state_dir);
  if (!state_lock) return fail(state_lock.message());
  if (config.as_root && ::access(config.imp_path.c_str(), X_OK) != 0)
    spdlog::warn("{} is missing: jobs of other users will fail to start", config.imp_path);
  auto address = step_address(o, config.state_dir);
  if (!address) return fail(address.message());
  config.step_uri = *address;
  StepNodeConfig step_config;
  step_config.self_uri = config.step_uri;
  if (!o.key_file.empty()) {
    auto key = job::load_key_file(o.key_file);
    if (!key) return fail("--key-file: " + key.message());
    step_config.cluster_key = std::move(*key);
  }

  std::set<std::string> names;
  for (const auto& n : config.nodes) names.insert(n.name);
  if (size_t n = kill_orphaned_tasks(o.controller, names); n > 0)
    spdlog::warn(
        "ended {} task process(es) of an earlier run of this agent: the controller "
        "has already declared them lost",
        n);

  auto loop = EventLoop::create();
  if (!loop) return fail(loop.message());
  std::unique_ptr<ControllerLink> link;
  Agent agent(
      **loop, config,
      [&link](uint64_t session, corral::v1::AgentMessage&& msg) {
        if (link) link->send(session, std::move(msg));
      },
      std::move(step_config));
  if (auto st = agent.start(); !st) return fail(st.message());
  StepServer steps;
  if (auto st = steps.start(config.step_uri, o.listen, net::TlsServerFiles{o.tls_cert, o.tls_key}, agent, **loop); !st)
    return fail(st.message());
  link = std::make_unique<ControllerLink>(o.controller, **loop, agent);
  spdlog::info("agent {} hosting {} node(s), controller {}, steps on {}", config.agent_id, config.nodes.size(),
               o.controller, config.step_uri);
  link->start();
  agent.raise_loop_priority();
  (*loop)->run();
  link->stop();
  steps.stop();
  spdlog::info("stopped");
  return 0;
}
