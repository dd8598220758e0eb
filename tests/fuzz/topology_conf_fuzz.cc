// Slurm topology.conf files.
#include "fuzz_target.h"
#include "topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)corral::topology::parse_topology_conf(std::string(fuzz_text(data, size)), "topology.conf");
  return 0;
}
