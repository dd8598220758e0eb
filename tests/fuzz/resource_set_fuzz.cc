// R (RFC 20) documents.
#include "fuzz_target.h"
#include "job/resource_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = corral::job::parse_resource_set(fuzz_text(data, size));
  if (!r) return 0;
  CORRAL_FUZZ_CHECK(corral::job::parse_resource_set(corral::job::to_json(*r)).ok());
  return 0;
}
