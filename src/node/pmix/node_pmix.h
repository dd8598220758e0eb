// Starting the PMIx namespace of one agent's ranks of a step, the same way for a job's
// own tasks and for a step's (as node/pmi/node_pmi.h does for PMI-1/PMI-2): the agent's
// server started if it was not, the layout checked, and an abort or a rank lost reported
// as one line the launcher shows and acts on.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node/pmix/pmix_server.h"

namespace corral::node {

struct NodePmix {
  std::string nspace;                // from the request (job::pmix_namespace_name)
  std::vector<std::string> nodes;    // every node of the step, in rank order
  std::vector<uint32_t> tasks;       // their task counts
  std::vector<std::string> local;    // this agent's nodes with tasks; not empty
  uid_t uid = 0;
  gid_t gid = 0;
  bool virtual_nodes = false;        // PmixLayout::virtual_nodes
};

// `host` null: the agent serves no PMIx (Errc::unavailable). Errors say "--mpi=pmix: ..."
// for a layout that does not hold together.
Result<std::unique_ptr<PmixNamespace>> start_node_pmix(PmixHost* host, NodePmix pmix, PmiExchange& exchange,
                                                       std::function<void(const std::string& text)> failed);

}  // namespace corral::node
