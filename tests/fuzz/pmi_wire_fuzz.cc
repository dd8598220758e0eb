// PMI wire messages, as tasks send them to the agent's PMI server: each input as a PMI-1
// line, as a PMI-2 message and as a PMI-2 length field.
#include "fuzz_target.h"
#include "node/pmi/pmi_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto text = fuzz_text(data, size);
  (void)corral::node::pmi::parse_line(text);
  (void)corral::node::pmi::parse_v2(text);
  if (text.size() >= corral::node::pmi::kV2LengthChars)
    (void)corral::node::pmi::parse_v2_length(std::string_view(text).substr(0, corral::node::pmi::kV2LengthChars));
  return 0;
}
