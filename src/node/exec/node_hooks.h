// The node halves of the hooks this agent was built with (hook/node_hook.h), called in
// registry order. The agent, the job executor, the step node and the perilog runner go
// through this; none of them names a hook.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hook/node_hook.h"

namespace corral::node {

class NodeHooks {
 public:
  NodeHooks() = default;
  explicit NodeHooks(std::vector<std::unique_ptr<hook::NodeHook>> hooks) : hooks_(std::move(hooks)) {}

  const std::vector<std::unique_ptr<hook::NodeHook>>& all() const { return hooks_; }
  // Each hook's start; the first error, prefixed with the hook's name.
  Status start(const hook::NodeSetup& setup) const;
  // Each hook's task environment; the first error, prefixed with the hook's name.
  Status task_env(std::string_view node, uint32_t uid, const hook::EnvMap& from_controller, hook::EnvMap& env) const;
  // Whether any hook's task_env has something to do for these tasks.
  bool task_env_applies(std::string_view node, uint32_t uid, const hook::EnvMap& from_controller) const;
  void perilog_env(std::vector<std::string>& env) const;
  // Hook name -> what the node has for it (hooks with nothing to report left out).
  std::map<std::string, std::string> hardware(std::string_view node) const;

 private:
  std::vector<std::unique_ptr<hook::NodeHook>> hooks_;
};

}  // namespace corral::node
