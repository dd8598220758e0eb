// Idsets: what parses encodes back to the same set.
#include "fuzz_target.h"
#include "util/idset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto ids = corral::IdSet::parse(fuzz_text(data, size));
  if (!ids) return 0;
  auto again = corral::IdSet::parse(ids->encode());
  CORRAL_FUZZ_CHECK(again.ok());
  CORRAL_FUZZ_CHECK(*again == *ids);
  return 0;
}
