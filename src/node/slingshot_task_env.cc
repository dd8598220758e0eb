#include "node/slingshot_task_env.h"

#include "fabric/slingshot/cxi_device.h"
#include "fabric/slingshot/slingshot_env.h"

namespace corral::node {

namespace ss = fabric::slingshot;

Status add_slingshot_env(const std::string& cxi_spec, const std::string& node, uint32_t uid,
                         const EnvMap& extra, EnvMap& env) {
  auto it = extra.find("SLINGSHOT_VNIS");
  if (it == extra.end()) return {};
  std::vector<uint16_t> vnis;
  if (!it->second.empty()) {
    auto parsed = ss::parse_vni_list(it->second);
    if (!parsed) return invalid("cray-slingshot: SLINGSHOT_VNIS from the controller: " + parsed.message());
    vnis = std::move(*parsed);
  }
  if (vnis.empty()) {
    for (const char* k : {"SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS"})
      env.erase(k);
    return {};
  }
  auto dev = ss::open_cxi_device(cxi_spec, node);
  if (!dev) return Error{dev.error().code, "cray-slingshot: " + dev.message()};
  if (auto st = ss::apply_slingshot_env(**dev, vnis, uid, env); !st)
    return Error{st.error().code, "cray-slingshot: " + st.message()};
  return {};
}

}  // namespace corral::node
