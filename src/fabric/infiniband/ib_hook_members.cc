#include "fabric/infiniband/ib_hook_members.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/subnet_manager.h"
#include "hook/perilog_text.h"

namespace corral::fabric::infiniband {

using nlohmann::json;

namespace {

bool is_guid(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return false;
  return true;
}

void add(PkeyMembers& out, const json& pkey, const json& guid) {
  if (!pkey.is_string() || !guid.is_string() || !is_guid(guid.get<std::string>())) return;
  auto key = parse_pkey(pkey.get<std::string>());
  if (!key || *key == kDefaultPkey) return;
  out[*key].insert(guid.get<std::string>());
}

}  // namespace

json members_json(const PkeyMembers& m) {
  json out = json::object();
  for (const auto& [pkey, guids] : m) out[ufm_pkey(pkey)] = guids;
  return out;
}

PkeyMembers members_of_json(const json& j) {
  PkeyMembers out;
  if (!j.is_object()) return out;
  for (const auto& [key, guids] : j.items())
    if (guids.is_array())
      for (const auto& g : guids) add(out, json(key), g);
  return out;
}

void members_from_output(const std::string& output, PkeyMembers& out) {
  auto doc = json::parse(hook::line_after(output, "config: "), nullptr, false);
  if (!doc.is_object() || !doc.contains("interfaces") || !doc["interfaces"].is_array()) return;
  for (const auto& i : doc["interfaces"])
    if (i.is_object()) add(out, i.value("pkey", json()), i.value("guid", json()));
}

}  // namespace corral::fabric::infiniband
