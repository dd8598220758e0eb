#include "fabric/infiniband/ib_node_hook.h"

#include <sys/stat.h>

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_node_ops.h"
#include "fabric/infiniband/ib_sysfs.h"
#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace {

using nlohmann::json;

// What a node reports stays under the controller's limit for one hardware entry.
constexpr size_t kMaxReport = 8000;
// A job's document: 64 interfaces of a few hundred bytes each.
constexpr size_t kMaxDocument = 64 * 1024;

class IbNodeHook final : public hook::NodeHook {
 public:
  std::string_view name() const override { return "infiniband"; }

  std::vector<hook::NodeOption> options() override {
    return {{"--ib-sysfs",
             "Where Infiniband devices are discovered: the sysfs root (/sys), a tree of files laid out the same "
             "way (ROOT/NODE is used for a node when it exists), or none",
             &sysfs_}};
  }

  Status start(const hook::NodeSetup& setup) override {
    if (sysfs_ == "none") return {};
    // Made by corral-infiniband's first prolog (0711, like the state directory: a job's
    // user reaches its own document, lists nothing).
    state_ = setup.state_dir + "/infiniband";
    return {};
  }

  // The devices as JSON, fabrics left for the controller to map from their subnet prefixes.
  std::string hardware(std::string_view node) const override {
    if (sysfs_ == "none") return {};
    auto found = discover(DiscoveryOptions{sysfs_root_for(sysfs_, std::string(node)), kDefaultPciIds}, Fabrics{});
    if (!found || found->devices.empty()) return {};
    json devices = json::array();
    for (const auto& d : found->devices) {
      json one = to_json(d);
      if (devices.dump().size() + one.dump().size() + 1 > kMaxReport) break;
      devices.push_back(std::move(one));
    }
    return devices.dump();
  }

  void perilog_env(std::vector<std::string>& env) const override {
    if (sysfs_ == "none") return;
    env.push_back("CORRAL_IB_SYSFS=" + sysfs_);
    env.push_back("CORRAL_IB_STATE=" + state_);
  }

  // Only for a job the controller gave interfaces (CORRAL_IB_INTERFACES).
  bool task_env_applies(const hook::TaskEnvRequest& req) const override {
    return !state_.empty() && req.from_controller->contains("CORRAL_IB_INTERFACES");
  }

  Status task_env(const hook::TaskEnvRequest& req, hook::EnvMap& env) override {
    if (!req.from_controller->contains("CORRAL_IB_INTERFACES") || state_.empty()) return {};
    auto jobid = parse_unsigned(env["CORRAL_JOBID"], 10);
    if (!jobid) return invalid("no CORRAL_JOBID for the job's Infiniband document");
    const std::string path = job_document_path(node_state_dir(state_, std::string(req.node)), *jobid);
    // The file is the job's user's (0400), who could make it anything: read a bounded prefix.
    std::ifstream in(path);
    std::string text(kMaxDocument + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    json doc = text.size() > kMaxDocument ? json() : json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("interfaces"))
      return Error{Errc::unavailable, fmt::format("the job's Infiniband document {} is missing or unreadable", path)};
    std::string names, ucx, nccl;
    for (const auto& i : doc["interfaces"]) {
      const std::string dev = i.value("device", "");
      const std::string port = std::to_string(i.value("port", 1u));
      names += (names.empty() ? "" : ",") + dev;
      ucx += (ucx.empty() ? "" : ",") + dev + ":" + port;
      nccl += (nccl.empty() ? "" : ",") + dev + ":" + port;
    }
    env["CORRAL_IB_CONFIG"] = path;
    env["CORRAL_IB_DEVICES"] = names;
    env.try_emplace("UCX_NET_DEVICES", ucx);  // the user's own setting wins
    env.try_emplace("NCCL_IB_HCA", nccl);
    return {};
  }

 private:
  std::string sysfs_ = "/sys";
  std::string state_;
};

}  // namespace

std::unique_ptr<hook::NodeHook> make_ib_node_hook() { return std::make_unique<IbNodeHook>(); }

}  // namespace corral::fabric::infiniband
