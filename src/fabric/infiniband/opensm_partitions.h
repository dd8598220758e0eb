// OpenSM as the subnet manager: corral owns a partitions.conf (infiniband.opensm-partitions)
// and rewrites it whole after every change, then runs infiniband.opensm-reload (for example
// "pkill -HUP opensm") so OpenSM rereads it. The file starts with the site's own lines
// (infiniband.opensm-base; else the default partition with every port a full member), then
// one line per key and up to 32 GUIDs (OpenSM merges lines of one key; a line must stay
// under its 4096 characters).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "fabric/infiniband/subnet_manager.h"

namespace corral::fabric::infiniband {

// The file's text: `base`, then each key with members, named by `names` (else corral_KEY).
std::string render_partitions(const std::string& base, const std::map<uint16_t, std::string>& names,
                              const std::map<uint16_t, std::set<std::string>>& members);

// The members of corral's own lines in a file render_partitions wrote (a site's base lines
// are not read).
std::map<uint16_t, std::set<std::string>> parse_corral_partitions(const std::string& text);

class OpenSmPartitions final : public SubnetManager {
 public:
  // Reads back what an earlier corrald wrote to `path`.
  OpenSmPartitions(std::string path, std::string reload, std::string base, std::map<uint16_t, std::string> names);
  std::string describe() const override { return "OpenSM " + path_; }
  Status join(uint16_t pkey, const std::vector<std::string>& guids) override;
  Status leave(uint16_t pkey, const std::vector<std::string>& guids, bool drop) override;

 private:
  Status write_and_reload();

  std::string path_, reload_, base_;
  std::map<uint16_t, std::string> names_;
  std::map<uint16_t, std::set<std::string>> members_;
};

}  // namespace corral::fabric::infiniband
