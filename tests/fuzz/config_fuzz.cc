// corrald's TOML configuration file, with the sections hooks own handed to their parsers
// as corrald does (ctld/hooks/registry.cc).
#include "ctld/config.h"
#include "fabric/slingshot/slingshot_config.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = corral::ctld::parse_config(fuzz_text(data, size), "corrald.toml", {}, {"slingshot"});
  if (c) (void)corral::fabric::slingshot::parse_slingshot_settings(c->hook_settings["slingshot"]);
  return 0;
}
