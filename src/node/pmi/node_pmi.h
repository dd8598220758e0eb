// Starting the PMI server of one node's ranks, the same way for a job's own tasks and for
// a step's: the ranks [first_rank, first_rank + ntasks), and an abort or a broken PMI
// connection reported as one line the launcher shows and acts on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "node/pmi/pmi_server.h"

namespace corral::node {

struct NodePmi {
  PmiStep step;  // kvsname, size (every rank of the job or step), process mapping
  uint32_t first_rank = 0;
  uint32_t ntasks = 0;
  std::string node;  // names the node in a failure without a rank
};

// `failed` gets "rank 3: MPI_Abort (exit code 2)" or "node n1: <what broke>"; the other
// ranks would wait forever, so the launcher should end the tasks. Errors of the server's
// start keep their code (Errc::unavailable: out of descriptors) and say what failed.
// The callbacks that turn an abort or a broken connection into one such line, for the
// PMI server and for a PMIx namespace alike.
PmiCallbacks pmi_failure_callbacks(const std::string& node, std::function<void(const std::string& text)> failed);

Result<std::unique_ptr<PmiServer>> start_node_pmi(EventLoop& loop, PmiExchange& exchange, NodePmi pmi,
                                                  std::function<void(const std::string& text)> failed);

}  // namespace corral::node
