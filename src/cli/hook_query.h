// The HookQuery RPC as the commands that hooks bring (`corral slingshot`, `corral dws`)
// use it: one request to the named hook, its JSON answer parsed.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace corral::cli {

// An error is the controller's (the hook's message, or "no hook 'x' is loaded ...");
// an answer that is not JSON is Errc::internal.
Result<nlohmann::json> hook_query_json(const std::string& uri, const std::string& hook, const std::string& what,
                                       const nlohmann::json& args);

}  // namespace corral::cli
