#include "fabric/infiniband/ufm_subnet_manager.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::fabric::infiniband {

using nlohmann::json;

std::string UfmSubnetManager::describe() const { return "UFM at " + client_.options().base_url; }

Result<http::HttpReply> UfmSubnetManager::call(std::string_view method, const std::string& path,
                                               const std::string& body, std::string_view what) {
  std::lock_guard lock(mu_);
  auto r = client_.request(method, path, body);
  if (!r) return Error{r.error().code, fmt::format("UFM: {}: {}", what, r.message())};
  return r;
}

Result<std::string> UfmSubnetManager::version() {
  auto r = call("GET", "/ufmRest/app/ufm_version", {}, "version");
  if (!r) return r.error();
  if (!r->ok()) return http::reply_error(*r, "UFM: version");
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("ufm_release_version"))
    return Error{Errc::unavailable, "UFM: version: the answer has no ufm_release_version (is this UFM?)"};
  return j["ufm_release_version"].is_string() ? j["ufm_release_version"].get<std::string>() : j.dump();
}

Status UfmSubnetManager::join(uint16_t pkey, const std::vector<std::string>& guids) {
  if (guids.empty()) return {};
  const std::string what =
      fmt::format("adding {} GUID{} to partition key {}", guids.size(), guids.size() == 1 ? "" : "s", ufm_pkey(pkey));
  json body{
      {"pkey", ufm_pkey(pkey)}, {"guids", guids}, {"membership", "full"}, {"index0", false}, {"ip_over_ib", true}};
  auto r = call("POST", "/ufmRest/resources/pkeys", body.dump(), what);
  if (!r) return r.error();
  if (!r->ok()) return http::reply_error(*r, "UFM: " + what);
  return {};
}

Status UfmSubnetManager::leave(uint16_t pkey, const std::vector<std::string>& guids, bool drop) {
  if (drop) {
    const std::string what = "removing partition key " + ufm_pkey(pkey);
    auto r = call("DELETE", "/ufmRest/resources/pkeys/" + ufm_pkey(pkey), {}, what);
    if (!r) return r.error();
    if (!r->ok() && r->status != 404) return http::reply_error(*r, "UFM: " + what);
    return {};
  }
  if (guids.empty()) return {};
  const std::string what = fmt::format("removing {} GUID{} from partition key {}", guids.size(),
                                       guids.size() == 1 ? "" : "s", ufm_pkey(pkey));
  json body{{"pkey", ufm_pkey(pkey)}, {"guids", guids}};
  auto r = call("POST", "/ufmRest/actions/remove_guids_from_pkey", body.dump(), what);
  if (!r) return r.error();
  if (!r->ok() && r->status != 404) return http::reply_error(*r, "UFM: " + what);
  return {};
}

}  // namespace corral::fabric::infiniband
