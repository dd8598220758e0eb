// Hostlists: what parses encodes back to the same hosts in the same order.
#include "fuzz_target.h"
#include "util/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto hl = corral::Hostlist::parse(fuzz_text(data, size));
  if (!hl) return 0;
  auto again = corral::Hostlist::parse(hl->encode());
  CORRAL_FUZZ_CHECK(again.ok());
  CORRAL_FUZZ_CHECK(again->hosts() == hl->hosts());
  (void)hl->uniq().encode();
  return 0;
}
