#include "fabric/slingshot/slingshot_env.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

namespace corral::fabric::slingshot {

namespace {

constexpr const char* kVars[] = {"SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS"};
constexpr uint32_t kAllTcs = kTcDedicatedAccess | kTcLowLatency | kTcBulkData | kTcBestEffort;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

Result<std::vector<uint16_t>> parse_vni_list(std::string_view text) {
  std::vector<uint16_t> out;
  if (text.empty()) return out;
  std::set<uint16_t> seen;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    unsigned v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v > UINT16_MAX)
      return invalid(fmt::format("VNI list '{}': '{}' is not a VNI (an integer from 0 to 65535)", text, item));
    if (!seen.insert(static_cast<uint16_t>(v)).second)
      return invalid(fmt::format("VNI list '{}': VNI {} appears twice", text, v));
    out.push_back(static_cast<uint16_t>(v));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::string format_vni_list(const std::vector<uint16_t>& vnis) {
  std::vector<std::string> items;
  for (auto v : vnis) items.push_back(std::to_string(v));
  return join(items);
}

std::string format_tcs(uint32_t tcs) { return fmt::format("0x{:02x}", tcs); }

bool is_job_service(const Service& svc, const std::vector<uint16_t>& vnis, uint32_t uid) {
  const auto& m = svc.desc.member_uids;
  return !svc.desc.system && same_vni_set(svc.desc, vnis) && std::find(m.begin(), m.end(), uid) != m.end();
}

Status apply_slingshot_env(CxiDevice& dev, const std::vector<uint16_t>& vnis, uint32_t uid,
                           std::map<std::string, std::string>& env) {
  if (vnis.empty()) {
    for (const char* k : kVars) env.erase(k);
    return {};
  }
  auto nics = dev.list();
  if (!nics) return nics.error();
  std::vector<std::string> devices, ids, searched;
  uint32_t tcs = 0;
  for (const auto& nic : *nics) {
    searched.push_back(nic.name);
    auto it = std::find_if(nic.services.begin(), nic.services.end(),
                           [&](const Service& s) { return is_job_service(s, vnis, uid); });
    if (it == nic.services.end()) continue;
    devices.push_back(nic.name);
    ids.push_back(std::to_string(it->id));
    tcs |= it->desc.tcs == 0 ? kAllTcs : it->desc.tcs;  // 0: every class allowed
  }
  if (devices.empty()) {
    if (nics->empty()) {  // a node without Slingshot NICs: nothing to use
      for (const char* k : kVars) env.erase(k);
      return {};
    }
    return not_found(fmt::format("no CXI service for VNIs {} and uid {} on {} (did the slingshot prolog run?)",
                                 format_vni_list(vnis), uid, join(searched)));
  }
  env["SLINGSHOT_VNIS"] = format_vni_list(vnis);
  env["SLINGSHOT_DEVICES"] = join(devices);
  env["SLINGSHOT_SVC_IDS"] = join(ids);
  env["SLINGSHOT_TCS"] = format_tcs(tcs);
  return {};
}

}  // namespace corral::fabric::slingshot
