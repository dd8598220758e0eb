// R, the resource set of an allocation (Flux RFC 20, version 1, R_lite form).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/idset.h"
#include "util/result.h"

namespace corral::job {

struct RNode {
  uint32_t rank = 0;  // position in the job's name-sorted nodelist
  std::string name;
  IdSet cores;
  IdSet gpus;
  uint64_t memory_mb = 0;  // not part of RFC 20; kept in our own "properties"-free extension
};

struct ResourceSet {
  std::vector<RNode> nodes;  // in rank order
  double starttime = 0;
  double expiration = 0;  // 0: none

  std::string nodelist() const;  // hostlist of the node names, ranged
  unsigned ncores() const;
  unsigned ngpus() const;
};

// RFC 20 JSON: {"version":1,"execution":{"R_lite":[...],"nodelist":[...],"starttime":..,
// "expiration":..}}. R_lite entries with identical children are merged into one rank idset.
std::string to_json(const ResourceSet& r);
Result<ResourceSet> parse_resource_set(std::string_view json_text);

}  // namespace corral::job
