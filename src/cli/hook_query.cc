#include "cli/hook_query.h"

#include <nlohmann/json.hpp>

#include "cli/client/client.h"

namespace corral::cli {

Result<nlohmann::json> hook_query_json(const std::string& uri, const std::string& hook, const std::string& what,
                                       const nlohmann::json& args) {
  Client client(uri);
  auto text = client.hook_query(hook, what, args.dump());
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Error{Errc::internal, "the controller's answer is not JSON"};
  return j;
}

}  // namespace corral::cli
