// The nodes the controller knows (each registered at least once), by name and by their
// index in the scheduler, with the partitions they belong to. Guarded by the controller's
// lock, like the rest of its state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent.pb.h"
#include "ctld/agent_link.h"
#include "ctld/config.h"

namespace corral::ctld {

struct NodeEntry {
  std::string name;
  uint32_t index = 0;  // in the scheduler
  uint32_t cores = 0, gpus = 0;
  uint64_t memory_mb = 0;
  std::shared_ptr<AgentLink> link;  // null while down
  std::string incarnation;          // of the agent process serving the node
  bool drained = false;
  std::string reason;
  double reason_time = 0;
  uint32_t reason_userid = 0;
  std::string down_reason = "never registered";
  std::set<uint64_t> jobs;          // jobs holding resources here
  std::set<uint64_t> housekeeping;  // jobs whose housekeeping runs here: no new work until empty
  std::vector<std::string> partitions;
  std::vector<v1::ControllerMessage> held;      // commands waiting for the agent to connect
  std::string step_uri;                         // where the node's agent serves StepService (last registration)
  std::map<std::string, std::string> hardware;  // what the agent's hooks report (last registration)
  unsigned launch_faults = 0;                   // jobs in a row whose tasks the node could not start
};

// The partition of jobs that name none: the one marked default, else "default".
std::string default_partition(const std::vector<PartitionConfig>& partitions);

class NodeTable {
 public:
  // `partitions` (the configuration's, which must outlive this) say which partitions a
  // node joins when it is added; without any, every node is in partition "default".
  explicit NodeTable(const std::vector<PartitionConfig>& partitions);

  NodeEntry* find(std::string_view name);
  const NodeEntry* find(std::string_view name) const;
  // A node known to be here (the scheduler's allocations and the job's exec nodes only
  // name such nodes).
  NodeEntry& named(std::string_view name) { return *find(name); }
  const NodeEntry& named(std::string_view name) const { return *find(name); }
  NodeEntry& at(uint32_t index) { return nodes_[index]; }
  const NodeEntry& at(uint32_t index) const { return nodes_[index]; }
  // Adds a node registering for the first time as the scheduler's node `index` (the next
  // one), in the partitions whose node lists name it.
  NodeEntry& add(const v1::NodeResources& res, uint32_t index);

  size_t size() const { return nodes_.size(); }
  std::vector<NodeEntry>::iterator begin() { return nodes_.begin(); }
  std::vector<NodeEntry>::iterator end() { return nodes_.end(); }
  std::vector<NodeEntry>::const_iterator begin() const { return nodes_.begin(); }
  std::vector<NodeEntry>::const_iterator end() const { return nodes_.end(); }

  const std::string& default_partition() const { return default_partition_; }
  // The nodes of a partition, by scheduler index; null when there is no such partition.
  const std::vector<uint32_t>* partition(const std::string& name) const;
  std::string partition_names() const;  // "batch, debug"

 private:
  const std::vector<PartitionConfig>& config_;
  std::vector<NodeEntry> nodes_;  // by scheduler index
  struct NameHash {               // lookups by string_view without a copy
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> index_;
  std::map<std::string, std::vector<uint32_t>> partitions_;  // member node indices
  std::string default_partition_;
};

}  // namespace corral::ctld
