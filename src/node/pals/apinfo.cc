#include "node/pals/apinfo.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace corral::node::pals {

namespace {

// The format's structures, member for member. Their sizes and offsets are what Cray PMI
// reads, so they are pinned below for the LP64 ABI.
struct Header {
  int32_t version;
  uint64_t total_size;
  uint64_t comm_profile_size, comm_profile_offset;
  int32_t ncomm_profiles;
  uint64_t cmd_size, cmd_offset;
  int32_t ncmds;
  uint64_t pe_size, pe_offset;
  int32_t npes;
  uint64_t node_size, node_offset;
  int32_t nnodes;
  uint64_t nic_size, nic_offset;
  int32_t nnics;
  uint64_t status_offset;
  uint64_t dist_size, dist_offset;
};
struct CommProfile {
  uint32_t svc_id, traffic_classes;
  uint16_t vnis[4];
  uint8_t nvnis;
  char device_name[16];
};
struct Cmd {
  int32_t npes, pes_per_node, cpus_per_pe;
};
struct Pe {
  int32_t localidx, cmdidx, nodeidx;
};
struct Node {
  int32_t nid;
  char hostname[64];
};
struct Nic {
  int32_t nodeidx;
  int32_t address_type;
  char address[64];
  int16_t numa_node;
  char device_name[16];
  int64_t unused[2];
};
struct Distance {
  uint8_t num_nic_distances, accelerator_distances;
};

static_assert(sizeof(Header) == 160 && offsetof(Header, ncomm_profiles) == 32 && offsetof(Header, cmd_size) == 40 &&
              offsetof(Header, npes) == 80 && offsetof(Header, nnodes) == 104 && offsetof(Header, nnics) == 128 &&
              offsetof(Header, dist_offset) == 152);
static_assert(sizeof(CommProfile) == 36 && sizeof(Cmd) == 12 && sizeof(Pe) == 12 && sizeof(Node) == 68 &&
              sizeof(Nic) == 112 && offsetof(Nic, unused) == 96 && sizeof(Distance) == 2);
static_assert(std::is_trivially_copyable_v<Header> && std::is_trivially_copyable_v<Node>);

constexpr int32_t kVersion = 5;
constexpr std::size_t kMaxRanks = 1u << 20;

template <typename T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

Status check_layout(const Layout& layout) {
  if (layout.nodes.empty() || layout.nodes.size() != layout.tasks.size())
    return invalid("cray-pals: the step's layout has no nodes, or not one task count per node");
  std::size_t ranks = 0;
  for (std::size_t i = 0; i < layout.nodes.size(); ++i) {
    if (layout.nodes[i].empty() || layout.nodes[i].size() >= sizeof(Node::hostname))
      return invalid("cray-pals: node name '" + layout.nodes[i].substr(0, 80) +
                     "' does not fit the apinfo file (1 to 63 characters)");
    if (layout.tasks[i] == 0) return invalid("cray-pals: node " + layout.nodes[i] + " has no ranks in the layout");
    ranks += layout.tasks[i];
    if (ranks > kMaxRanks) return invalid("cray-pals: more than 1048576 ranks");
  }
  return {};
}

Result<std::string> apinfo_bytes(const Layout& layout) {
  if (auto st = check_layout(layout); !st) return st.error();
  const auto nnodes = static_cast<int32_t>(layout.nodes.size());
  int32_t npes = 0, most = 0;
  for (uint32_t t : layout.tasks) {
    npes += static_cast<int32_t>(t);
    most = std::max(most, static_cast<int32_t>(t));
  }
  Header h{};
  h.version = kVersion;
  h.comm_profile_size = sizeof(CommProfile);
  h.cmd_size = sizeof(Cmd);
  h.pe_size = sizeof(Pe);
  h.node_size = sizeof(Node);
  h.nic_size = sizeof(Nic);
  h.dist_size = sizeof(Distance);
  h.ncmds = 1;
  h.npes = npes;
  h.nnodes = nnodes;
  // Sections follow the header in this order; empty ones take no room, and the status
  // and distance sections, which have no count in the header, say 0 when absent.
  h.comm_profile_offset = sizeof(Header);
  h.cmd_offset = h.comm_profile_offset;
  h.pe_offset = h.cmd_offset + sizeof(Cmd);
  h.node_offset = h.pe_offset + sizeof(Pe) * static_cast<uint64_t>(npes);
  h.nic_offset = h.node_offset + sizeof(Node) * static_cast<uint64_t>(nnodes);
  h.total_size = h.nic_offset;

  std::string out;
  out.reserve(h.total_size);
  append(out, h);
  append(out, Cmd{npes, most, static_cast<int32_t>(std::max<uint32_t>(layout.cpus_per_task, 1))});
  for (int32_t node = 0; node < nnodes; ++node)
    for (int32_t local = 0; local < static_cast<int32_t>(layout.tasks[static_cast<std::size_t>(node)]); ++local)
      append(out, Pe{local, 0, node});
  for (int32_t node = 0; node < nnodes; ++node) {
    Node n{};
    n.nid = node;  // the node's index in the step, as Cray PMI expects: not a hardware id
    const std::string& name = layout.nodes[static_cast<std::size_t>(node)];
    std::memcpy(n.hostname, name.data(), name.size());
    append(out, n);
  }
  return out;
}

}  // namespace corral::node::pals
