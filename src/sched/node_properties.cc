#include "sched/node_properties.h"

#include <algorithm>

namespace corral::sched {

size_t NodeProperties::set(uint32_t node, const std::vector<std::string>& names, bool* changed) {
  std::vector<uint32_t> ids;
  size_t dropped = 0;
  for (const auto& n : names) {
    if (n.empty() || n.size() > kMaxPropertyName || ids.size() >= kMaxPropertiesPerNode) {
      ++dropped;
      continue;
    }
    auto it = ids_.find(n);
    if (it == ids_.end()) {
      if (by_id_.size() >= kMaxPropertyNames) {
        ++dropped;
        continue;
      }
      it = ids_.emplace(n, static_cast<uint32_t>(by_id_.size())).first;
      by_id_.push_back(n);
    }
    ids.push_back(it->second);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (of_node_.size() <= node) of_node_.resize(node + 1);
  *changed = of_node_[node] != ids;
  of_node_[node] = std::move(ids);
  return dropped;
}

std::vector<uint32_t> NodeProperties::filter(const std::vector<uint32_t>& candidates,
                                             const std::vector<std::string>& required) const {
  std::vector<uint32_t> want;
  for (const auto& r : required) {
    auto it = ids_.find(r);
    if (it == ids_.end()) return {};  // no node has ever offered it
    want.push_back(it->second);
  }
  std::sort(want.begin(), want.end());
  std::vector<uint32_t> out;
  for (uint32_t n : candidates) {
    if (n >= of_node_.size()) continue;
    const auto& has = of_node_[n];
    if (std::includes(has.begin(), has.end(), want.begin(), want.end())) out.push_back(n);
  }
  return out;
}

std::vector<std::string> NodeProperties::names(uint32_t node) const {
  std::vector<std::string> out;
  if (node >= of_node_.size()) return out;
  for (uint32_t id : of_node_[node]) out.push_back(by_id_[id]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace corral::sched
