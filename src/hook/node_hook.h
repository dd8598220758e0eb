// The node half of a hook (docs/interfaces/hooks.md): what fabric and storage do on a node
// for the jobs the agent runs there. The controller half (hook.h) reserves and decides;
// this half turns the job's reservation into what its tasks see, and tells the agent what
// the node has. corral-node knows hooks only through this interface: the one file that
// names concrete hooks is src/node/hooks/registry.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::hook {

using EnvMap = std::map<std::string, std::string>;

// A corral-node command-line option the hook owns (`--cxi`): the agent adds it to its
// --help and fills *value before NodeHook::start.
struct NodeOption {
  std::string flag;  // "--cxi"
  std::string help;
  std::string* value;  // holds the default until the command line is read
};

struct NodeSetup {
  std::string state_dir;  // the agent's --state-dir (absolute): a hook may keep files below it
};

// What a hook sees of the tasks whose environment is being built on one node.
struct TaskEnvRequest {
  std::string_view node;  // the node's name
  uint32_t uid = 0;       // the tasks' user
  // What the controller's hooks set for the job (SLINGSHOT_VNIS, ...), with this node's own
  // values over the job's.
  const EnvMap* from_controller = nullptr;
};

class NodeHook {
 public:
  virtual ~NodeHook() = default;
  // The same name as the hook's controller half ("cray-slingshot"): it prefixes messages.
  virtual std::string_view name() const = 0;
  virtual std::vector<NodeOption> options() { return {}; }
  // Once, after the command line is read and before any job runs: an error stops the
  // agent with its message.
  virtual Status start(const NodeSetup&) { return {}; }
  // Adds to (or removes from) the environment of a job's or a step's tasks on this node
  // before they start. An error fails the job's or step's launch on this node.
  virtual Status task_env(const TaskEnvRequest&, EnvMap& /*env*/) { return {}; }
  // Whether task_env has anything to do for these tasks (say, the controller gave the job
  // this hook's variables). When no hook has, the agent leaves the environment where it
  // is instead of building the whole of it into an EnvMap for the hooks: a cheap check,
  // called for every step.
  virtual bool task_env_applies(const TaskEnvRequest&) const { return true; }
  // "KEY=VALUE" entries for the prolog, epilog and housekeeping commands the agent runs
  // as root (a hook's own node command learns from them what the node has).
  virtual void perilog_env(std::vector<std::string>& /*env*/) const {}
  // What this node has for the hook ("cxi0,cxi1"), reported when the agent registers and
  // shown by `corral nodes --json`; empty: nothing to report.
  virtual std::string hardware(std::string_view /*node*/) const { return {}; }
};

}  // namespace corral::hook
