// One Infiniband device as corral sees it: a PCI physical function under
// /sys/class/infiniband (each port of a dual-port card is one), with what users select it
// by (model name, vendor, fabric) and what the node needs to configure it (slot, GUIDs,
// SR-IOV). It travels from the node agent to the controller as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fabric/infiniband/pci_slot.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

struct IbPort {
  unsigned num = 1;
  std::string state;       // "ACTIVE", "DOWN", "INIT", "ARMED"
  std::string phys_state;  // "LinkUp", "Disabled", "Polling"
  std::string rate;        // "200 Gb/sec (4X HDR)"
  std::string link_layer;  // "InfiniBand" (an "Ethernet" port is not an Infiniband port)
  uint32_t lid = 0;
  uint64_t subnet_prefix = 0;  // from gids/0
  bool active() const { return state == "ACTIVE"; }
};

struct IbDevice {
  std::string name;  // "mlx5_0", "ibp202s0f0": the kernel's name on this node
  PciSlot slot;
  uint16_t vendor_id = 0, device_id = 0;
  std::string vendor;                     // "Mellanox Technologies" (from pci.ids; "0x15b3" when unknown)
  std::string model;                      // "MT28908 Family [ConnectX-6]" (from pci.ids; "0x101b" when unknown)
  std::string node_guid, sys_image_guid;  // "946d:ae03:002a:c100"; the ports of one card share the latter
  std::string firmware;
  int numa_node = -1;
  std::vector<IbPort> ports;  // Infiniband ports only
  unsigned sriov_total = 0, sriov_enabled = 0;
  std::string fabric;  // from the first port's subnet prefix

  // Usable for a job: some port is ACTIVE.
  bool active() const;
  // "port 1 DOWN (Polling)": why it is not active, for messages.
  std::string port_summary() const;
};

// The JSON the node reports and the controller reads back (from_json checks every field:
// the report crosses a trust boundary and is bounded by the caller).
nlohmann::json to_json(const IbDevice& d);
Result<IbDevice> device_from_json(const nlohmann::json& j);

// Physical functions in the order users count them: numeric PCI slot order.
void sort_by_slot(std::vector<IbDevice>& devices);

}  // namespace corral::fabric::infiniband
