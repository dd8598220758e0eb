// Mapping a job's interface requests to one node's devices: model and fabric pick the
// group, instance the N-th of the group in PCI slot order (compared as numbers), a virtual
// function a VF of that physical function. Every way a request can be wrong has its own
// message; the controller runs this against each node class at submit and against the
// node's own devices in the prolog (slots may differ between nodes of a class).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric/infiniband/ib_device.h"
#include "fabric/infiniband/ib_fabrics.h"
#include "fabric/infiniband/ib_request.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

struct IbChoice {
  size_t request = 0;  // its index in the job's list
  IbDevice device;     // the physical function
  std::string fabric;
  std::optional<unsigned> vf;  // the virtual function's id on it
  std::string partition;
};

struct SelectContext {
  const Fabrics* fabrics = nullptr;
  // Whether a partition name is one the job may join ("job" and the configured ones).
  std::function<bool(const std::string&)> partition_known;
  std::string node;  // for messages
};

Result<std::vector<IbChoice>> select_devices(const std::vector<IbDevice>& devices,
                                             const std::vector<IbRequest>& requests, const SelectContext& ctx);

}  // namespace corral::fabric::infiniband
