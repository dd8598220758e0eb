// The controller's hooks: the built-in policies (dependencies, time limits, prolog and
// epilog) and the fabric and storage hooks corrald is built with. The one place on the
// controller side that names concrete hooks: a new hook adds a line to registry.cc and
// brings its own [section] parser.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ctld/config.h"
#include "hook/hook.h"

namespace corral::ctld {

// The configuration sections hooks own (for load_config).
std::vector<std::string> hook_sections();
// Every hook corrald runs, in the order they see events. An error (a bad [section] key)
// names the file and key.
Result<std::vector<std::unique_ptr<hook::JobHook>>> make_hooks(const Config& cfg, const hook::HookSetup& setup);

}  // namespace corral::ctld
