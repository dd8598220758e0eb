// Configuration of the simulated NICs (a TOML file; see docs/slingshot-nic.md): how many
// NICs a node has, their capacity, the system services that exist before any job, and
// faults injected on chosen nodes. One file describes every node of a test cluster.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/slingshot/cxi_device.h"
#include "util/hostlist.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

enum class FaultKind { busy, alloc_fail, missing_nic };

struct SimFault {
  FaultKind kind = FaultKind::busy;
  Hostlist nodes;   // empty: every node
  std::string nic;  // empty: every NIC
  // busy: destroy answers busy for this long after the first attempt on a service.
  double seconds = std::numeric_limits<double>::infinity();
  std::string message;  // alloc-fail: the driver's complaint

  bool applies(std::string_view node, std::string_view nic_name) const;
};

struct SimSystemService {
  std::string name;
  std::vector<std::string> nics;  // empty: every NIC
  ServiceDesc desc;               // desc.system is always true
};

struct SimConfig {
  uint32_t nics = 1;  // named cxi0, cxi1, ...
  Limits capacity{};  // .max per resource
  std::vector<SimSystemService> system_services;
  std::vector<SimFault> faults;
};

// Cassini's totals per NIC, as the cxi driver counts them (see the doc).
Limits cassini_capacity();
// One Cassini NIC with the driver's default service (id 1, VNIs 1 and 10, any user).
SimConfig default_sim_config();

// `source` names the text in error messages (usually the file's path).
Result<SimConfig> parse_sim_config(std::string_view toml_text, const std::string& source);
Result<SimConfig> load_sim_config(const std::string& path);

}  // namespace corral::fabric::slingshot
