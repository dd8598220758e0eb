// Jobspecs, JSON or YAML, as corrald and every agent parse them.
#include "fuzz_target.h"
#include "job/jobspec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = corral::job::parse_jobspec(fuzz_text(data, size));
  if (!spec) return 0;
  // What corrald stores must parse again.
  auto again = corral::job::parse_jobspec(corral::job::jobspec_to_string(*spec));
  CORRAL_FUZZ_CHECK(again.ok());
  return 0;
}
