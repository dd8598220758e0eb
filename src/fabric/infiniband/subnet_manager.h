// The subnet manager is what makes a partition key real on the fabric: the ports whose
// GUIDs are full members of a key may talk on it. corral drives NVIDIA UFM's REST
// interface (subnet-manager = "ufm") or writes an OpenSM partitions.conf and has OpenSM
// reread it (subnet-manager = "opensm"). Calls block: the infiniband hook makes them from
// a worker thread, never under the controller's lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/infiniband/ib_config.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

class SubnetManager {
 public:
  virtual ~SubnetManager() = default;
  // "UFM at https://...", "OpenSM /etc/opensm/partitions.conf": for messages.
  virtual std::string describe() const = 0;
  // Makes `guids` (16 lower-case hex digits each) full members of `pkey`, creating the
  // partition when needed. Repeating it is harmless.
  virtual Status join(uint16_t pkey, const std::vector<std::string>& guids) = 0;
  // Takes `guids` out of `pkey`; with `drop`, removes the partition itself (a job's own
  // key). What is already gone counts as done.
  virtual Status leave(uint16_t pkey, const std::vector<std::string>& guids, bool drop) = 0;
};

// The subnet manager the configuration names; nullptr for "none". Reads UFM's credentials
// file (it must not be readable by others).
Result<std::unique_ptr<SubnetManager>> make_subnet_manager(const IbConfig& cfg);

// UFM's way of writing a key: "0x1001".
std::string ufm_pkey(uint16_t pkey);

}  // namespace corral::fabric::infiniband
