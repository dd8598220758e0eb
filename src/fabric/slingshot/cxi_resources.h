// NIC resource limits for a job's CXI service: the seed's table (HPE's recommendation,
// reserved quantities scaled by the cores the job holds on the node, maxima fixed), and
// fitting that request onto a NIC that other services already reserve parts of. Pure
// functions: the prolog calls them with what the device lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/slingshot/cxi_device.h"

namespace corral::fabric::slingshot {

// The driver refuses a dedicated trigger-list-entry pool smaller than this (and TLE
// reserved must equal TLE max), so the table's 1*ncores TLEs are raised to it.
inline constexpr uint32_t kMinTles = 8;

// The seed's table for a job holding `ncores` cores on the node.
Limits desired_limits(uint32_t ncores);

// What is left on the NIC: capacity minus the reserved quantities of its services.
Limits available_limits(const Nic& nic);

struct FittedLimits {
  Limits limits{};
  // One line per resource whose reservation was scaled back, e.g.
  // "txqs reserved 40 -> 12 (NIC cxi0 has 12 left)". Empty when everything fit.
  std::vector<std::string> warnings;
};

// Clamps each maximum to what the NIC has left and scales each reservation back to it.
FittedLimits fit_limits(const Limits& desired, const Nic& nic);

}  // namespace corral::fabric::slingshot
