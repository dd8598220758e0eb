// Discovery of a node's Infiniband devices from sysfs. The root is configurable (the
// agent's --ib-sysfs): the real /sys on a node, or a tree of plain files in tests and the
// demo, laid out as the kernel lays out
//   class/infiniband/<dev>/{node_guid,sys_image_guid,fw_ver,device -> PCI function}
//   class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer,lid,gids/0}
//   <PCI function>/{vendor,device,numa_node,sriov_totalvfs,sriov_numvfs,physfn}
#pragma once

#include <string>
#include <vector>

#include "fabric/infiniband/ib_device.h"
#include "fabric/infiniband/ib_fabrics.h"
#include "fabric/infiniband/pci_names.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

// More than any node has; a tree with more is refused rather than read without end.
inline constexpr size_t kMaxIbDevices = 256;

struct DiscoveryOptions {
  std::string sysfs_root = "/sys";
  std::string pci_ids = kDefaultPciIds;
};

struct Discovery {
  std::vector<IbDevice> devices;   // physical functions with an Infiniband port, in slot order
  std::vector<std::string> notes;  // what was left out and why ("mlx5_2: Ethernet link layer")
};

// A node without /class/infiniband has no devices (not an error); an unreadable PCI ID
// database is (names are what capabilities compare, so a node must not fall back to ids).
Result<Discovery> discover(const DiscoveryOptions& opts, const Fabrics& fabrics);

}  // namespace corral::fabric::infiniband
