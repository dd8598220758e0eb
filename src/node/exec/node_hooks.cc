#include "node/exec/node_hooks.h"

namespace corral::node {
namespace {

Error named(const hook::NodeHook& h, const Error& e) { return Error{e.code, std::string(h.name()) + ": " + e.message}; }

}  // namespace

Status NodeHooks::start(const hook::NodeSetup& setup) const {
  for (const auto& h : hooks_)
    if (auto st = h->start(setup); !st) return st;  // the message names the option at fault
  return {};
}

Status NodeHooks::task_env(std::string_view node, uint32_t uid, const hook::EnvMap& from_controller,
                           hook::EnvMap& env) const {
  const hook::TaskEnvRequest req{node, uid, &from_controller};
  for (const auto& h : hooks_)
    if (auto st = h->task_env(req, env); !st) return named(*h, st.error());
  return {};
}

bool NodeHooks::task_env_applies(std::string_view node, uint32_t uid, const hook::EnvMap& from_controller) const {
  const hook::TaskEnvRequest req{node, uid, &from_controller};
  for (const auto& h : hooks_)
    if (h->task_env_applies(req)) return true;
  return false;
}

void NodeHooks::perilog_env(std::vector<std::string>& env) const {
  for (const auto& h : hooks_) h->perilog_env(env);
}

std::map<std::string, std::string> NodeHooks::hardware(std::string_view node) const {
  std::map<std::string, std::string> out;
  for (const auto& h : hooks_)
    if (auto what = h->hardware(node); !what.empty()) out.emplace(std::string(h->name()), std::move(what));
  return out;
}

}  // namespace corral::node
