#include "api_error.h"

#include <fmt/format.h>

namespace corral::emu::dws {

using nlohmann::json;

json status_body(const ApiError& e) {
  json j = {{"kind", "Status"},    {"apiVersion", "v1"},   {"metadata", json::object()},
            {"status", "Failure"}, {"message", e.message}, {"reason", e.reason},
            {"code", e.code}};
  if (!e.details.empty()) j["details"] = e.details;
  return j;
}

namespace {
json object_details(const KindInfo& k, const std::string& name) {
  return {{"name", name}, {"group", k.group}, {"kind", k.plural}};
}
}  // namespace

ApiError not_found_error(const KindInfo& k, const std::string& name) {
  return {404, "NotFound", fmt::format("{} \"{}\" not found", k.resource(), name), object_details(k, name)};
}

ApiError already_exists_error(const KindInfo& k, const std::string& name) {
  return {409, "AlreadyExists", fmt::format("{} \"{}\" already exists", k.resource(), name), object_details(k, name)};
}

ApiError conflict_error(const KindInfo& k, const std::string& name) {
  return {409, "Conflict",
          fmt::format("Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your "
                      "changes to the latest version and try again",
                      k.resource(), name),
          object_details(k, name)};
}

ApiError invalid_error(const KindInfo& k, const std::string& name, const std::vector<FieldError>& errs) {
  std::vector<std::string> parts;
  json causes = json::array();
  for (const auto& e : errs) {
    parts.push_back(e.field + ": " + e.message);
    causes.push_back({{"reason", e.reason}, {"message", e.message}, {"field", e.field}});
  }
  std::string what = parts.size() == 1 ? parts[0] : "[" + fmt::format("{}", fmt::join(parts, ", ")) + "]";
  return {422,
          "Invalid",
          fmt::format("{}.{} \"{}\" is invalid: {}", k.kind, k.group, name, what),
          {{"name", name}, {"group", k.group}, {"kind", k.kind}, {"causes", causes}}};
}

ApiError webhook_denied(const std::string& webhook, const std::string& message) {
  return {403, "Forbidden", fmt::format("admission webhook \"{}\" denied the request: {}", webhook, message), {}};
}

ApiError bad_request(const std::string& message) { return {400, "BadRequest", message, {}}; }

ApiError gone_error(const std::string& message) { return {410, "Expired", message, {}}; }

}  // namespace corral::emu::dws
