#include "ctld/node_table.h"

#include <algorithm>

#include "util/hostlist.h"

namespace corral::ctld {

std::string default_partition(const std::vector<PartitionConfig>& partitions) {
  for (const auto& p : partitions)
    if (p.is_default) return p.name;
  return "default";
}

NodeTable::NodeTable(const std::vector<PartitionConfig>& partitions)
    : config_(partitions), default_partition_(ctld::default_partition(partitions)) {
  for (const auto& p : config_) partitions_[p.name];
  if (config_.empty()) partitions_[default_partition_];
}

NodeEntry* NodeTable::find(std::string_view name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

const NodeEntry* NodeTable::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

namespace {

// Members stay ascending: requests take them as their allowed nodes (Request::allowed_sorted).
void insert_sorted(std::vector<uint32_t>& members, uint32_t index) {
  members.insert(std::upper_bound(members.begin(), members.end(), index), index);
}

}  // namespace

NodeEntry& NodeTable::add(const v1::NodeResources& res, uint32_t index) {
  NodeEntry& e = nodes_.emplace_back();
  e.name = res.name();
  e.index = index;
  e.cores = res.cores();
  e.gpus = res.gpus();
  e.memory_mb = res.memory_mb();
  index_[e.name] = index;
  if (config_.empty()) {
    insert_sorted(partitions_[default_partition_], index);
    e.partitions.push_back(default_partition_);
  }
  for (const auto& p : config_) {
    bool member = p.nodes.empty();
    if (!member)
      if (auto hl = Hostlist::parse(p.nodes)) member = hl->contains(e.name);
    if (member) {
      insert_sorted(partitions_[p.name], index);
      e.partitions.push_back(p.name);
    }
  }
  return e;
}

const std::vector<uint32_t>* NodeTable::partition(const std::string& name) const {
  auto it = partitions_.find(name);
  return it == partitions_.end() ? nullptr : &it->second;
}

std::string NodeTable::partition_names() const {
  std::string names;
  for (const auto& [name, members] : partitions_) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace corral::ctld
