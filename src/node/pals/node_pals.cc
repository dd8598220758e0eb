#include "node/pals/node_pals.h"

#include <filesystem>

namespace corral::node {

Result<std::shared_ptr<const PalsStep>> PalsStep::make(PalsStepInfo info) {
  if (info.base.empty() || info.base.front() != '/')
    return invalid("--mpi=cray-pals needs the agent's state directory (--state-dir) for its spool directories");
  if (info.layout.nodes.size() > 1 && info.control_ports.empty())
    return invalid(
        "--mpi=cray-pals on several nodes needs MPI ports for PMI_CONTROL_PORT, and this job has none: "
        "the site sets [steps] mpi-ports (docs/admin.md)");
  auto bytes = pals::apinfo_bytes(info.layout);  // checks the layout too
  if (!bytes) return bytes.error();
  return std::make_shared<const PalsStep>(std::move(info), std::move(*bytes));
}

PalsStep::PalsStep(PalsStepInfo info, std::string apinfo) : info_(std::move(info)), apinfo_(std::move(apinfo)) {
  uint32_t first = 0;
  for (uint32_t i = 0; i < info_.layout.nodes.size(); ++i) {
    first_rank_.push_back(first);
    first += info_.layout.tasks[i];
    index_.emplace(info_.layout.nodes[i], i);
  }
}

Result<std::unique_ptr<PalsNode>> PalsStep::start_node(uint32_t index, const std::string& node, uint32_t first_rank,
                                                       uint32_t ntasks) const {
  const auto& layout = info_.layout;
  if (index >= layout.nodes.size() || layout.nodes[index] != node || layout.tasks[index] != ntasks ||
      first_rank_[index] != first_rank)
    return invalid("--mpi=cray-pals: the step's layout disagrees with node " + node + "'s ranks");
  auto spool = pals::PalsSpool::create(info_.base, info_.apid + ".n" + std::to_string(index), info_.uid, info_.gid,
                                       apinfo_);
  if (!spool) return spool.error();
  return std::make_unique<PalsNode>(shared_from_this(), index, std::move(*spool));
}

std::optional<uint32_t> PalsStep::index_of(const std::string& node) const {
  auto it = index_.find(node);
  return it == index_.end() ? std::nullopt : std::optional(it->second);
}

std::vector<std::string> PalsNode::task_env(uint32_t rank) const {
  const PalsStepInfo& s = step_->info();
  std::vector<std::string> env = {"PALS_APID=" + s.apid,
                                  "PALS_APINFO=" + spool_->apinfo_path(),
                                  "PALS_RANKID=" + std::to_string(rank),
                                  "PALS_NODEID=" + std::to_string(index_),
                                  "PALS_SPOOL_DIR=" + spool_->dir(),
                                  "PMI_SHARED_SECRET=" + s.secret};
  if (!s.control_ports.empty()) env.push_back("PMI_CONTROL_PORT=" + s.control_ports);
  return env;
}

std::string pals_base(const std::string& state_dir) {
  if (state_dir.empty()) return "";
  std::error_code ec;
  auto dir = std::filesystem::absolute(state_dir, ec);
  return ec ? "" : (dir / "pals").string();
}

}  // namespace corral::node
