#include "storage/dws/job_directives.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::storage::dws {

using nlohmann::json;

namespace {

Status split_into(const std::string& text, std::vector<std::string>& out, size_t max_count) {
  if (text.size() > kMaxDirectiveText * max_count)
    return invalid(fmt::format("attributes.system.dw: longer than {} bytes", kMaxDirectiveText * max_count));
  std::vector<size_t> starts;
  for (size_t p = text.find("#DW "); p != std::string::npos; p = text.find("#DW ", p + 4)) starts.push_back(p);
  auto trimmed = [](std::string piece) {
    auto b = piece.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return std::string();
    return piece.substr(b, piece.find_last_not_of(" \t\r\n") - b + 1);
  };
  std::string before = trimmed(text.substr(0, starts.empty() ? text.size() : starts[0]));
  if (!before.empty())
    return invalid(fmt::format("attributes.system.dw: '{}' is not a #DW directive", before.substr(0, 80)));
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    std::string piece = trimmed(text.substr(starts[i], end - starts[i]));
    if (piece.size() > kMaxDirectiveText)
      return invalid(fmt::format("#DW directive longer than {} bytes: {}...", kMaxDirectiveText, piece.substr(0, 60)));
    if (out.size() >= max_count) return invalid(fmt::format("a job may give at most {} #DW directives", max_count));
    out.push_back(std::move(piece));
  }
  return {};
}

}  // namespace

Result<std::vector<std::string>> job_directives(const json& jobspec, size_t max_count) {
  std::vector<std::string> out;
  if (!jobspec.is_object() || !jobspec.contains("attributes")) return out;
  const json& attrs = jobspec["attributes"];
  if (!attrs.is_object() || !attrs.contains("system") || !attrs["system"].is_object()) return out;
  const json& sys = attrs["system"];
  if (!sys.contains("dw")) return out;
  const json& dw = sys["dw"];
  if (dw.is_string()) {
    if (auto st = split_into(dw.get_ref<const std::string&>(), out, max_count); !st) return st.error();
  } else if (dw.is_array()) {
    if (dw.size() > max_count) return invalid(fmt::format("a job may give at most {} #DW directives", max_count));
    for (const auto& d : dw) {
      if (!d.is_string()) return invalid("attributes.system.dw: every entry must be a string");
      if (auto st = split_into(d.get_ref<const std::string&>(), out, max_count); !st) return st.error();
    }
  } else {
    return invalid("attributes.system.dw must be a string or a list of strings");
  }
  return out;
}

Result<json> allocation_sets(const json& breakdown_sets,
                             const std::vector<std::pair<std::string, unsigned>>& per_rabbit, unsigned node_count,
                             uint64_t min_bytes) {
  json out = json::array();
  if (!breakdown_sets.is_array()) return invalid("the breakdown has no allocationSets");
  if (per_rabbit.empty() || node_count == 0) return invalid("none of the job's nodes is served by a rabbit");
  // Rabbits with the most of the job's nodes first (ties by name, for a stable choice).
  auto order = per_rabbit;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& set : breakdown_sets) {
    const std::string label = set.value("label", "");
    const std::string strategy = set.value("allocationStrategy", "");
    const uint64_t min_cap = set.value("minimumCapacity", uint64_t{0});
    json storage = json::array();
    uint64_t size = min_cap;
    const unsigned count = strategy == "AllocateSingleServer" ? 1
                           : set.contains("constraints") && set["constraints"].is_object()
                               ? set["constraints"].value("count", 0u)
                               : 0u;
    if (strategy == "AllocatePerCompute") {
      for (const auto& [rabbit, n] : per_rabbit) storage.push_back({{"name", rabbit}, {"allocationCount", n}});
    } else if (count > 0) {
      size = (min_cap + count - 1) / count;
      std::map<std::string, unsigned> used;
      for (unsigned i = 0; i < count; ++i) ++used[order[i % order.size()].first];
      for (const auto& [rabbit, n] : order)
        if (used.count(rabbit)) storage.push_back({{"name", rabbit}, {"allocationCount", used[rabbit]}});
    } else if (strategy == "AllocateAcrossServers") {
      unsigned g = 0;
      for (const auto& [rabbit, n] : per_rabbit) g = std::gcd(g, n);
      size = (static_cast<uint64_t>(g) * min_cap + node_count - 1) / node_count;
      for (const auto& [rabbit, n] : per_rabbit) storage.push_back({{"name", rabbit}, {"allocationCount", n / g}});
    } else {
      return invalid(fmt::format("allocation set '{}': unknown strategy '{}'", label, strategy));
    }
    out.push_back({{"label", label}, {"allocationSize", std::max(size, min_bytes)}, {"storage", storage}});
  }
  return out;
}

}  // namespace corral::storage::dws
