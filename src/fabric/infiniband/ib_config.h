// The [infiniband] section of corrald's configuration (docs/admin.md, "Infiniband"):
// fabrics by subnet prefix, named partitions with fixed keys, the pools per-job
// partitions and virtual-function GUIDs come from, and the subnet manager that applies
// partition membership (NVIDIA UFM's REST interface, or an OpenSM partitions.conf).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fabric/infiniband/ib_fabrics.h"
#include "hook/settings.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

// The default partition every port is in; never given to a job or named by a site.
inline constexpr uint16_t kDefaultPkey = 0x7fff;

struct NamedPartition {
  std::string name;
  uint16_t pkey = 0;
};

struct IbConfig {
  bool enabled = false;
  std::string default_fabric = kDefaultFabric;
  std::vector<FabricDef> fabrics;
  std::vector<NamedPartition> partitions;
  std::string pkey_pool;                    // RFC 22 id set of keys for partition=job ("0x2000-0x2fff" as hex)
  uint64_t guid_first = 0, guid_count = 0;  // virtual functions' port GUIDs
  std::string subnet_manager = "none";      // ufm, opensm, none
  std::string ufm_url;                      // "https://ufm.example.org"
  std::string ufm_credentials;              // file with "user:password" (root-only)
  std::string ufm_ca;                       // CA bundle; empty: the system's
  std::string opensm_partitions;            // the partitions.conf corral writes
  std::string opensm_reload;                // command run after each write (e.g. "pkill -HUP opensm")
  std::string opensm_base;                  // the site's own partitions.conf lines, copied first
  std::string command;                      // corral-infiniband on the nodes (default: beside corrald)
  double prolog_timeout = 60;
};

Result<IbConfig> parse_ib_settings(const hook::Settings& settings);

// "0x8001", "8001" (hex either way, as UFM and OpenSM write them) -> 0x0001-0x7ffe; the
// full-membership bit is ignored.
Result<uint16_t> parse_pkey(std::string_view text);
// "0x2000-0x2fff" (hex bounds) as the decimal RFC 22 set the pool takes.
Result<std::string> pkey_range_idset(std::string_view text);
// "0x0002c90300a00000-0x0002c90300afffff" -> first and count (at most 2^20 GUIDs).
Status parse_guid_range(std::string_view text, uint64_t& first, uint64_t& count);
// A GUID as UFM writes it: 16 lower-case hex digits.
std::string guid_hex(uint64_t guid);
// A GUID as sysfs writes it ("0002:c903:00a0:0001", "00:02:c9:03:00:a0:00:01") the same way.
std::string plain_guid(std::string_view text);

}  // namespace corral::fabric::infiniband
