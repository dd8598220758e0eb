// corrald's TOML configuration file.
#include "ctld/config.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)corral::ctld::parse_config(fuzz_text(data, size), "corrald.toml", {});
  return 0;
}
