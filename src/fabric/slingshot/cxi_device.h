// The CXI device interface: what corral needs from a node's Slingshot (Cassini) NICs.
// Two backends implement it: a simulated NIC (sim_cxi.h; the default where there is no
// Slingshot hardware) and real NICs through libcxi (libcxi_device.cc, built only where
// libcxi's headers exist and loaded at run time). The prolog, epilog, housekeeping and
// the task environment all go through this interface, never through a backend directly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::fabric::slingshot {

// NIC resources a CXI service can limit, in libcxi's order (enum cxi_rsrc_type).
enum class Rsrc : uint8_t { PTE, TXQ, TGQ, EQ, CT, LE, TLE, AC };
inline constexpr size_t kNumRsrc = 8;
const char* rsrc_name(Rsrc r);  // "ptes", "txqs", ... (config keys and messages)

struct Limit {
  uint32_t reserved = 0;  // guaranteed to the service's users
  uint32_t max = 0;       // never exceeded
};
using Limits = std::array<Limit, kNumRsrc>;  // indexed by Rsrc

// Traffic classes as the SLINGSHOT_TCS bitmask encodes them (the seed's table).
enum TrafficClass : uint32_t {
  kTcDedicatedAccess = 1,
  kTcLowLatency = 2,
  kTcBulkData = 4,
  kTcBestEffort = 8,
};

// What a service allows; an empty restriction list means "unrestricted" as in libcxi.
struct ServiceDesc {
  std::vector<uint32_t> member_uids;  // only these users may use the service
  std::vector<uint16_t> vnis;         // at most 4 (the driver's limit)
  uint32_t tcs = 0;                   // TrafficClass bits; 0 = every class
  bool limited = false;               // when false, `limits` is ignored
  Limits limits{};
  bool system = false;  // a service the system created (not a job's): never cleaned
};

struct Service {
  uint32_t id = 0;
  ServiceDesc desc;
};

struct Nic {
  std::string name;   // "cxi0"
  Limits capacity{};  // .max = the NIC's total of each resource; .reserved unused
  std::vector<Service> services;
};

class CxiDevice {
 public:
  virtual ~CxiDevice() = default;
  // The node's NICs with their capacity and existing services.
  virtual Result<std::vector<Nic>> list() = 0;
  // Creates a service; returns its id. Fails (message names the NIC and why) when the
  // NIC is missing, the reserved quantities do not fit, or the driver refuses.
  virtual Result<uint32_t> alloc_service(const std::string& nic, const ServiceDesc& desc) = 0;
  // Destroys a service. Errc::unavailable means busy (operations still in flight): retry.
  virtual Status destroy_service(const std::string& nic, uint32_t svc_id) = 0;
};

// Traffic class names as libcxi and the seed spell them ("BEST_EFFORT", ...), for one bit.
const char* tc_name(uint32_t tc_bit);
// Parses one traffic class name, with or without a "TC_" prefix, case-insensitive.
Result<uint32_t> parse_tc(std::string_view name);

// True when the service's VNIs are exactly `vnis` as a set (order and duplicates ignored).
bool same_vni_set(const ServiceDesc& desc, const std::vector<uint16_t>& vnis);

// The C factory a libcxi module (corral-cxi-libcxi.so) exports: returns a device owned by
// the caller (delete it before unloading the module), or null with a message in `err`.
inline constexpr const char* kLibcxiFactorySymbol = "corral_cxi_libcxi_open";
using LibcxiFactory = CxiDevice* (*)(char* err, size_t err_len);

// Opens the backend named by `spec` for node `node`:
//   "sim:STATE_DIR[:CONFIG_FILE]"  simulated NICs, state in STATE_DIR/NODE.json
//   "libcxi"                       real NICs (fails with a clear message when libcxi or
//                                  corral's libcxi module is not installed)
//   "none"                         a node without Slingshot NICs (list() is empty)
Result<std::unique_ptr<CxiDevice>> open_cxi_device(const std::string& spec, const std::string& node);

}  // namespace corral::fabric::slingshot
