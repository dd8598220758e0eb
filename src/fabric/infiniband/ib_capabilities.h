// A node's Infiniband capabilities the seed's way: one entry per (model, vendor, fabric)
// with a count, with nothing machine-specific (no slot, GUID or VF), so identical hardware
// gives identical capabilities and nodes with identical capabilities form a class.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fabric/infiniband/ib_device.h"

namespace corral::fabric::infiniband {

struct IbCapability {
  std::string name;    // the model: "MT28908 Family [ConnectX-6]"
  std::string vendor;  // "Mellanox Technologies"
  std::string fabric;
  unsigned count = 0;
  // Instances (0-based, in slot order within this entry) without an active port: the
  // hardware is there, but a job cannot use it now.
  std::vector<unsigned> inactive;

  auto operator<=>(const IbCapability&) const = default;
};

// Sorted by (name, vendor, fabric).
std::vector<IbCapability> capabilities_of(const std::vector<IbDevice>& devices);
nlohmann::json to_json(const std::vector<IbCapability>& caps);

// Nodes grouped by identical hardware (name, vendor, fabric, count; activity aside): the
// seed's instance type. A member whose capabilities are not all active is listed in
// `degraded` with what is down.
struct IbNodeClass {
  std::vector<IbCapability> hardware;  // inactive lists empty
  std::vector<std::string> nodes;
  std::map<std::string, std::string>
      degraded;  // node -> "MT28908 Family [ConnectX-6] on IbFabric1: instance 1 inactive"
};
std::vector<IbNodeClass> node_classes(const std::map<std::string, std::vector<IbCapability>>& by_node);

}  // namespace corral::fabric::infiniband
