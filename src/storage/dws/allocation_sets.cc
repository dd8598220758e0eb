#include "storage/dws/allocation_sets.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::storage::dws {

using nlohmann::json;

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
