// The rabbits an emulated system has and the computes each reaches over PCIe, and the
// objects a DWS installation holds from the start: a Storage per rabbit, the
// SystemConfiguration, and the NNF DWDirectiveRule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crd_catalog.h"
#include "object_store.h"
#include "util/result.h"

namespace corral::emu::dws {

struct Rabbit {
  std::string name;
  uint64_t capacity = 0;
  std::vector<std::string> computes;
};

struct RabbitInventory {
  std::vector<Rabbit> rabbits;
  // "rabbit0=node[0-3];rabbit1=node[4-7]"
  static Result<RabbitInventory> parse_spec(const std::string& spec, uint64_t capacity);
  // flux-rabbitmapping's JSON: {"rabbits": {"r": {"capacity": N, "hostlist": "..."}}, ...}
  static Result<RabbitInventory> load_mapping(const std::string& path);
};

// Creates what is missing (a restarted emulator keeps what it has).
Status seed_objects(ObjectStore& store, const CrdCatalog& catalog, const RabbitInventory& inv,
                    const std::string& ruleset_path);

}  // namespace corral::emu::dws
