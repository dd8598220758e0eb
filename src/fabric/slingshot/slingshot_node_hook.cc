#include "fabric/slingshot/slingshot_node_hook.h"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fabric/slingshot/cxi_device.h"
#include "fabric/slingshot/slingshot_env.h"

namespace corral::fabric::slingshot {
namespace {

constexpr const char* kTaskVars[] = {"SLINGSHOT_VNIS", "SLINGSHOT_DEVICES", "SLINGSHOT_SVC_IDS", "SLINGSHOT_TCS"};

class SlingshotNodeHook final : public hook::NodeHook {
 public:
  std::string_view name() const override { return "cray-slingshot"; }

  std::vector<hook::NodeOption> options() override {
    return {{"--cxi",
             "Slingshot NICs: auto (libcxi where /dev/cxi0 exists, else simulated), libcxi, sim (simulated NICs, "
             "state under STATE_DIR/cxi) or none",
             &backend_},
            {"--cxi-sim-config",
             "TOML file shaping the simulated NICs: count, capacity, system services, faults (docs/slingshot-nic.md)",
             &sim_config_}};
  }

  // --cxi and --cxi-sim-config as an open_cxi_device spec.
  Status start(const hook::NodeSetup& setup) override {
    std::string kind = backend_;
    if (kind == "auto") kind = ::access("/dev/cxi0", F_OK) == 0 ? "libcxi" : "sim";
    if (!sim_config_.empty() && kind != "sim")
      return invalid("--cxi-sim-config applies to simulated NICs only (--cxi sim), not --cxi " + kind);
    if (kind == "libcxi" || kind == "none") {
      spec_ = kind;
      return {};
    }
    if (kind != "sim") return invalid("--cxi: unknown backend '" + backend_ + "' (auto, libcxi, sim, none)");
    spec_ = "sim:" + setup.state_dir + "/cxi";
    if (sim_config_.empty()) return {};
    std::error_code ec;
    auto cfg = std::filesystem::absolute(sim_config_, ec);
    if (ec || ::access(cfg.c_str(), R_OK) != 0) return invalid("--cxi-sim-config: cannot read '" + sim_config_ + "'");
    spec_ += ":" + cfg.string();
    return {};
  }

  // When the controller's half gave the job SLINGSHOT_VNIS, this node's CXI services for
  // those VNIs; an empty SLINGSHOT_VNIS (no reservation) clears all four variables so
  // applications fall back to the default service. Without it, nothing changes.
  bool task_env_applies(const hook::TaskEnvRequest& req) const override {
    return req.from_controller->contains("SLINGSHOT_VNIS");
  }

  Status task_env(const hook::TaskEnvRequest& req, hook::EnvMap& env) override {
    auto it = req.from_controller->find("SLINGSHOT_VNIS");
    if (it == req.from_controller->end()) return {};
    std::vector<uint16_t> vnis;
    if (!it->second.empty()) {
      auto parsed = parse_vni_list(it->second);
      if (!parsed) return invalid("SLINGSHOT_VNIS from the controller: " + parsed.message());
      vnis = std::move(*parsed);
    }
    if (vnis.empty()) {
      for (const char* k : kTaskVars) env.erase(k);
      return {};
    }
    auto dev = open_cxi_device(spec_, std::string(req.node));
    if (!dev) return dev.error();
    return apply_slingshot_env(**dev, vnis, req.uid, env);
  }

  // corral-slingshot, run as the prolog and epilog, opens the same NICs.
  void perilog_env(std::vector<std::string>& env) const override { env.push_back("CORRAL_CXI=" + spec_); }

  // The NICs' names ("cxi0,cxi1", "... (simulated)" without real NICs). Every node an
  // agent hosts has the same ones (one real node, or simulated nodes sharing one
  // --cxi-sim-config): looked up once.
  std::string hardware(std::string_view node) const override {
    if (spec_ == "none") return {};
    if (!nics_) nics_ = nic_names(node);
    return *nics_;
  }

 private:
  std::string backend_ = "auto";
  std::string sim_config_;
  std::string spec_ = "none";
  mutable std::optional<std::string> nics_;

  std::string nic_names(std::string_view node) const {
    auto dev = open_cxi_device(spec_, std::string(node));
    if (!dev) return {};
    auto nics = (*dev)->list();
    if (!nics) return {};
    std::string out;
    for (const auto& nic : *nics) out += (out.empty() ? "" : ",") + nic.name;
    if (!out.empty() && spec_.rfind("sim:", 0) == 0) out += " (simulated)";
    return out;
  }
};

}  // namespace

std::unique_ptr<hook::NodeHook> make_slingshot_node_hook() { return std::make_unique<SlingshotNodeHook>(); }

}  // namespace corral::fabric::slingshot
