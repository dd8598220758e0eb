// PMI-1 wire lines, as tasks send them to the agent's PMI server.
#include "fuzz_target.h"
#include "node/pmi/pmi_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)corral::node::pmi::parse_line(fuzz_text(data, size));
  return 0;
}
