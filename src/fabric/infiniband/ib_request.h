// What a job asks of Infiniband, the seed's InstanceInfinibandConfig: interfaces chosen by
// model, fabric and instance (the N-th device of that model on that fabric, in PCI slot
// order), optionally a virtual function on it, and the partition each joins. Nothing
// machine-specific: the same request means the same hardware on every node of a class.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace corral::fabric::infiniband {

// Interfaces one job may ask for (nodes have a handful of devices; VFs a few each).
inline constexpr size_t kMaxIbInterfaces = 64;
// The seed's virtual_function_id range follows the card; this bounds what is parsed.
inline constexpr unsigned kMaxVfId = 1023;

struct IbRequest {
  std::string device;  // the model name as pci.ids writes it: "MT28908 Family [ConnectX-6]"
  std::string fabric;  // empty: the site's default fabric
  unsigned instance = 0;
  bool virtual_function = false;  // function_type=virtual
  std::optional<unsigned> vf;     // virtual_function_id; none: corral numbers them
  std::string partition;          // a configured partition's name, "job", or empty (the default)
};

// One --ib value: comma-separated key=value pairs, a value with commas in double quotes:
//   device="MT28908 Family [ConnectX-6]",fabric=IbFabric1,instance=1,vf=2,partition=job
// Keys: device (required), fabric, instance (or device_instance), function_type
// (physical|virtual), vf (or virtual_function_id; implies virtual), partition.
Result<IbRequest> parse_ib_option(std::string_view text);

// The jobspec form (attributes.system.infiniband): a list of objects with the seed's keys.
nlohmann::json to_json(const std::vector<IbRequest>& reqs);
Result<std::vector<IbRequest>> requests_from_json(const nlohmann::json& j);

}  // namespace corral::fabric::infiniband
