// RFC 18 eventlogs.
#include "fuzz_target.h"
#include "job/eventlog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto log = corral::job::decode_eventlog(fuzz_text(data, size));
  if (!log) return 0;
  for (const auto& ev : *log) CORRAL_FUZZ_CHECK(corral::job::decode_event(corral::job::encode_event(ev)).ok());
  return 0;
}
