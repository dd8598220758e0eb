// Which Infiniband fabric a port is on, found from the subnet prefix of its GID (the
// first 64 bits of ports/N/gids/0) rather than typed in per node: the site names its
// fabrics once ([[infiniband.fabric]] name + subnet-prefix) and an unnamed prefix is the
// site's default fabric.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::fabric::infiniband {

inline constexpr const char* kDefaultFabric = "default";

struct FabricDef {
  std::string name;
  std::string subnet_prefix;  // "fe80:0000:0000:0001"
};

// A fabric's or partition's name: 1-64 letters, digits, '-', '_' or '.'.
bool valid_name(std::string_view s);

// "fe80:0000:0000:0001" (four groups of 1-4 hex digits) as a number.
Result<uint64_t> parse_subnet_prefix(std::string_view text);
// The subnet prefix of a port GID as sysfs writes it ("fe80:0000:0000:0000:0002:c903:...").
Result<uint64_t> gid_subnet_prefix(std::string_view gid);

class Fabrics {
 public:
  Fabrics() = default;
  // Names must be unique, non-empty and printable; so must prefixes.
  static Result<Fabrics> create(const std::vector<FabricDef>& defs, std::string default_name = kDefaultFabric);

  const std::string& of_prefix(uint64_t prefix) const;
  bool known(std::string_view name) const;
  const std::string& default_name() const { return default_; }
  std::vector<std::string> names() const;  // the configured ones and the default, sorted

 private:
  std::map<uint64_t, std::string> by_prefix_;
  std::string default_ = kDefaultFabric;
};

}  // namespace corral::fabric::infiniband
