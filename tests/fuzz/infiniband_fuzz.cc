// Infiniband requests and device reports. Text is read three ways: as a --ib value (what
// parses must survive the jobspec form unchanged), and as JSON, as the jobspec's
// attributes.system.infiniband list and as a node's device report.
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_device.h"
#include "fabric/infiniband/ib_request.h"
#include "fuzz_target.h"

namespace ib = corral::fabric::infiniband;

namespace {

bool same(const ib::IbRequest& a, const ib::IbRequest& b) {
  return a.device == b.device && a.fabric == b.fabric && a.instance == b.instance &&
         a.virtual_function == b.virtual_function && a.vf == b.vf && a.partition == b.partition;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz_text(data, size);
  if (auto req = ib::parse_ib_option(text)) {
    auto back = ib::requests_from_json(ib::to_json({*req}));
    CORRAL_FUZZ_CHECK(back.ok());
    CORRAL_FUZZ_CHECK(back->size() == 1 && same(back->front(), *req));
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  if (auto reqs = ib::requests_from_json(j)) {
    CORRAL_FUZZ_CHECK(reqs->size() <= ib::kMaxIbInterfaces);
    auto back = ib::requests_from_json(ib::to_json(*reqs));
    CORRAL_FUZZ_CHECK(back.ok() && back->size() == reqs->size());
  }
  if (auto dev = ib::device_from_json(j)) {
    auto back = ib::device_from_json(ib::to_json(*dev));
    CORRAL_FUZZ_CHECK(back.ok());
    CORRAL_FUZZ_CHECK(back->name == dev->name && back->ports.size() == dev->ports.size());
  }
  return 0;
}
