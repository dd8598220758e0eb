#include "storage/dws/node/dws_node_hook.h"

#include <sys/stat.h>

#include <fmt/format.h>

namespace corral::storage::dws {
namespace {

class DwsNodeHook final : public hook::NodeHook {
 public:
  std::string_view name() const override { return "dws"; }

  // Only for a job with rabbit storage: the controller's DW_JOB_* variables.
  bool task_env_applies(const hook::TaskEnvRequest& req) const override {
    if (!req.from_controller) return false;
    auto it = req.from_controller->lower_bound("DW_JOB_");
    return it != req.from_controller->end() && it->first.starts_with("DW_JOB_");
  }

  Status task_env(const hook::TaskEnvRequest& req, hook::EnvMap&) override {
    if (!req.from_controller) return {};
    for (const auto& [key, path] : *req.from_controller) {
      if (key.rfind("DW_JOB_", 0) != 0 || path.empty() || path.front() != '/') continue;
      struct stat st {};
      if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Error{Errc::unavailable,
                     fmt::format("{}: the job's rabbit storage {} is not mounted on node {}", key, path, req.node)};
      if (st.st_uid != req.uid)
        return Error{Errc::unavailable, fmt::format("{}: the job's rabbit storage {} on node {} belongs to uid {}, "
                                                    "not to the job's user {}",
                                                    key, path, req.node, st.st_uid, req.uid)};
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<hook::NodeHook> make_dws_node_hook() { return std::make_unique<DwsNodeHook>(); }

}  // namespace corral::storage::dws
