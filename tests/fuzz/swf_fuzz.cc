// Standard Workload Format traces (corral sim).
#include "fuzz_target.h"
#include "sim/swf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)corral::sim::parse_swf(fuzz_text(data, size), "fuzz.swf");
  return 0;
}
