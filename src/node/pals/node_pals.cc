#include "node/pals/node_pals.h"

#include <filesystem>


namespace corral::node {

Result<std::unique_ptr<PalsNode>> PalsNode::start(NodePals pals) {
  if (auto st = pals::check_layout(pals.layout); !st) return st.error();
  const auto& layout = pals.layout;
  uint32_t first = 0;
  for (uint32_t i = 0; i < pals.node_index && i < layout.tasks.size(); ++i) first += layout.tasks[i];
  if (pals.node_index >= layout.nodes.size() || layout.nodes[pals.node_index] != pals.node ||
      layout.tasks[pals.node_index] != pals.ntasks || first != pals.first_rank)
    return invalid("--mpi=cray-pals: the step's layout disagrees with node " + pals.node + "'s ranks");
  if (pals.base.empty() || pals.base.front() != '/')
    return invalid("--mpi=cray-pals needs the agent's state directory (--state-dir) for its spool directories");
  if (pals.layout.nodes.size() > 1 && pals.control_ports.empty())
    return invalid(
        "--mpi=cray-pals on several nodes needs MPI ports for PMI_CONTROL_PORT, and this job has none: "
        "the site sets [steps] mpi-ports (docs/admin.md)");
  auto bytes = pals::apinfo_bytes(pals.layout);
  if (!bytes) return bytes.error();
  auto spool = pals::PalsSpool::create(pals.base, pals.apid + ".n" + std::to_string(pals.node_index), pals.uid,
                                       pals.gid, *bytes);
  if (!spool) return spool.error();
  return std::make_unique<PalsNode>(std::move(pals), std::move(*spool));
}

std::vector<std::string> PalsNode::task_env(uint32_t rank) const {
  std::vector<std::string> env = {"PALS_APID=" + pals_.apid,
                                  "PALS_APINFO=" + spool_->apinfo_path(),
                                  "PALS_RANKID=" + std::to_string(rank),
                                  "PALS_NODEID=" + std::to_string(pals_.node_index),
                                  "PALS_SPOOL_DIR=" + spool_->dir(),
                                  "PMI_SHARED_SECRET=" + pals_.secret};
  if (!pals_.control_ports.empty()) env.push_back("PMI_CONTROL_PORT=" + pals_.control_ports);
  return env;
}

std::string pals_base(const std::string& state_dir) {
  if (state_dir.empty()) return "";
  std::error_code ec;
  auto dir = std::filesystem::absolute(state_dir, ec);
  return ec ? "" : (dir / "pals").string();
}

}  // namespace corral::node
