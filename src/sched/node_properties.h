// What hooks say each node offers their jobs ("ib:IbFabric1/MT28908 Family [ConnectX-6]/0"),
// from the hardware its agent reported, and the nodes that offer all of a job's required
// properties. Names are interned: a node holds small ids, so filtering a partition of
// 100,000 nodes costs one pass over sorted id lists. Guarded by the controller's lock.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace corral::sched {

// Per node, at most this many properties are kept; across the cluster, this many names.
inline constexpr size_t kMaxPropertiesPerNode = 512;
inline constexpr size_t kMaxPropertyNames = 65536;
inline constexpr size_t kMaxPropertyName = 256;

class NodeProperties {
 public:
  // Replaces what `node` offers. Names beyond the limits are dropped (the count comes back
  // so the caller can warn). True in `changed` when the set differs from before.
  size_t set(uint32_t node, const std::vector<std::string>& names, bool* changed);
  // Every node of `candidates` (ascending) that has all of `required`.
  std::vector<uint32_t> filter(const std::vector<uint32_t>& candidates, const std::vector<std::string>& required) const;
  // The names `node` offers, sorted.
  std::vector<std::string> names(uint32_t node) const;

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> by_id_;
  std::vector<std::vector<uint32_t>> of_node_;  // node -> sorted ids
};

}  // namespace corral::sched
