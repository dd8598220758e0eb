#include "node/pmix/node_pmix.h"

#include "node/pmi/node_pmi.h"

namespace corral::node {

Result<std::unique_ptr<PmixNamespace>> start_node_pmix(PmixHost* host, NodePmix pmix, PmiExchange& exchange,
                                                       std::function<void(const std::string& text)> failed) {
  if (host == nullptr) return Error{Errc::unavailable, "this agent serves no PMIx (--mpi=pmix)"};
  if (pmix.local.empty()) return invalid("--mpi=pmix: no node of the step has tasks on this agent");
  auto server = host->server();
  if (!server) return server.error();
  auto layout = pmix_block_layout(std::move(pmix.nspace), pmix.nodes, pmix.tasks, pmix.local, pmix.uid, pmix.gid);
  if (!layout) return Error{layout.error().code, "--mpi=pmix: " + layout.message()};
  layout->virtual_nodes = pmix.virtual_nodes;
  return (*server)->add(std::move(*layout), exchange, pmi_failure_callbacks(pmix.local.front(), std::move(failed)));
}

}  // namespace corral::node
