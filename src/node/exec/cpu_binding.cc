#include "node/exec/cpu_binding.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "util/idset.h"

namespace corral::node {

Result<std::vector<int>> cpus_of_cores(const NodeHardware& node, const std::string& cores) {
  if (node.core_cpus.empty() || cores.empty()) return std::vector<int>{};
  auto ids = IdSet::parse(cores);
  if (!ids) return invalid("cores '" + cores + "': " + ids.message());
  std::vector<int> out;
  for (uint32_t id : ids->to_vector()) {
    if (id >= node.core_cpus.size())
      return invalid("node " + node.name + " has no core " + std::to_string(id) + " (it has " +
                     std::to_string(node.core_cpus.size()) + ")");
    out.insert(out.end(), node.core_cpus[id].begin(), node.core_cpus[id].end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::vector<int>> task_cpus(const AgentConfig& config, const std::string& name, const std::string& cores,
                                        uint32_t ntasks) {
  std::vector<std::vector<int>> out(ntasks);
  const NodeHardware* hw = config.node(name);
  if (!config.cpu_bind || hw == nullptr || hw->core_cpus.empty() || ntasks == 0 || cores.empty()) return out;
  auto all = cpus_of_cores(*hw, cores);
  if (!all) {
    spdlog::warn("tasks on {} run unbound: {}", name, all.message());
    return out;
  }
  const std::vector<uint32_t> list = IdSet::parse(cores)->to_vector();  // valid: checked above
  if (list.size() % ntasks != 0) return std::vector<std::vector<int>>(ntasks, *all);
  const size_t share = list.size() / ntasks;
  for (uint32_t t = 0; t < ntasks; ++t) {
    for (size_t k = t * share; k < (t + 1) * share; ++k)
      out[t].insert(out[t].end(), hw->core_cpus[list[k]].begin(), hw->core_cpus[list[k]].end());
    std::sort(out[t].begin(), out[t].end());
  }
  return out;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace corral::node
