#include "ctld/hooks/registry.h"

#include "ctld/hooks/dependency_hook.h"
#include "ctld/hooks/perilog_hook.h"
#include "ctld/hooks/time_limit_hook.h"
#include "fabric/infiniband/ib_hook.h"
#include "fabric/slingshot/slingshot_hook.h"
#include "storage/dws/dws_hook.h"

namespace corral::ctld {
namespace {

using Factory = Result<std::unique_ptr<hook::JobHook>> (*)(const hook::Settings&, const hook::HookSetup&);

struct Configured {
  const char* section;
  Factory make;
};

// Hooks with a section of their own, made only when it turns them on.
constexpr Configured kConfigured[] = {
    {"slingshot", fabric::slingshot::make_slingshot_hook},
    {"rabbit", storage::dws::make_dws_hook},
    {"infiniband", fabric::infiniband::make_ib_hook},
};

}  // namespace

std::vector<std::string> hook_sections() {
  std::vector<std::string> out;
  for (const auto& c : kConfigured) out.emplace_back(c.section);
  return out;
}

Result<std::vector<std::unique_ptr<hook::JobHook>>> make_hooks(const Config& cfg, const hook::HookSetup& setup) {
  std::vector<std::unique_ptr<hook::JobHook>> hooks;
  hooks.push_back(make_dependency_hook());
  hooks.push_back(std::make_unique<TimeLimitHook>());
  hooks.push_back(
      std::make_unique<PerilogHook>(PerilogConfig{cfg.prolog, cfg.epilog, cfg.prolog_timeout, cfg.epilog_timeout}));
  for (const auto& c : kConfigured) {
    auto it = cfg.hook_settings.find(c.section);
    auto made = c.make(it == cfg.hook_settings.end() ? hook::Settings{} : it->second, setup);
    if (!made) return made.error();
    if (*made) hooks.push_back(std::move(*made));
  }
  return hooks;
}

}  // namespace corral::ctld
