// Settings of one node agent process, fixed at startup but for those the controller may
// give (NodeSettings in the register ack) where the command line left them unset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/credentials.h"
#include "node/exec/hardware.h"
#include "node/exec/node_hooks.h"

namespace corral::node {

struct AgentConfig {
  std::string agent_id;
  std::string incarnation;          // unique per process start: tells the controller we restarted
  std::vector<NodeHardware> nodes;  // the nodes this process hosts
  std::string controller_uri;       // given to jobs as CORRAL_URI
  std::string step_uri;             // where this agent serves StepService (Register.step_uri)
  std::string state_dir;            // batch scripts live in STATE_DIR/job-ID/
  std::string imp_path;             // corral-imp, used when running as root
  bool as_root = false;             // tasks of other users go through corral-imp
  double kill_grace = 2.0;          // SIGTERM -> SIGKILL delay (shutdown, perilog timeouts)
  // The event loop's scheduling priority (nice) when it is below the agent's own; its
  // tasks start at the agent's own. Only root may lower it. docs/admin.md "Node agent".
  int loop_nice = 0;
  // Threads besides the loop's that start the tasks of a turn's launches side by side
  // (TaskSupervisor::spawn_later); 0: the loop alone.
  unsigned spawn_helpers = 0;
  bool handle_termination = true;   // SIGTERM/SIGINT shut the agent down (off in tests)
  // The node halves of fabric and storage hooks (node/hooks/registry.cc), started.
  std::shared_ptr<const NodeHooks> hooks = std::make_shared<NodeHooks>();
  // Task containment (TaskCgroups::open): "none", "auto" or a cgroup v2 directory.
  std::string cgroups = "none";
  uint64_t job_pids_max = 0;  // pids.max of each job's cgroup; 0: none
  // Task output kept on disk (STATE_DIR/output.spool) while the controller is unreachable;
  // 0: none (lost, as without a state directory).
  uint64_t output_spool_max = 16u << 20;
  std::string tls_ca;  // PEM: TLS to the controller and other agents, trusting this CA (net/tls.h)
  // Who this agent is to a controller, step manager or agent over TCP, and who they are to
  // it (net/credentials.h). Null: MUNGE through libmunge's default socket.
  std::shared_ptr<net::Credentials> credentials;
  net::AuthMethod auth = net::AuthMethod::munge;  // the method of `credentials`
  // Tasks run only on the CPUs of their job's (or step's) cores on nodes with a CPU map
  // (NodeHardware::core_cpus: real nodes, not virtual ones).
  bool cpu_bind = true;
  // Set on the command line: the controller's value for it is not taken.
  bool local_job_pids_max = false, local_cpu_bind = false;

  const NodeHardware* node(const std::string& name) const {
    for (const auto& n : nodes)
      if (n.name == name) return &n;
    return nullptr;
  }
  bool hosts(const std::string& name) const { return node(name) != nullptr; }
};

}  // namespace corral::node
