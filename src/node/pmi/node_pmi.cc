#include "node/pmi/node_pmi.h"

#include <vector>

namespace corral::node {

PmiCallbacks pmi_failure_callbacks(const std::string& node, std::function<void(const std::string& text)> failed) {
  PmiCallbacks cb;
  cb.on_abort = [failed](const PmiAbort& a) {
    failed("rank " + std::to_string(a.rank) + ": " + (a.message.empty() ? "MPI_Abort" : a.message) + " (exit code " +
           std::to_string(a.exit_code) + ")");
  };
  cb.on_error = [failed, node](int rank, const std::string& message) {
    failed((rank >= 0 ? "rank " + std::to_string(rank) : "node " + node) + ": " + message);
  };
  return cb;
}

Result<std::unique_ptr<PmiServer>> start_node_pmi(EventLoop& loop, PmiExchange& exchange, NodePmi pmi,
                                                  std::function<void(const std::string& text)> failed) {
  std::vector<int> ranks;
  for (uint32_t i = 0; i < pmi.ntasks; ++i) ranks.push_back(static_cast<int>(pmi.first_rank + i));
  auto server = PmiServer::create(loop, exchange, std::move(pmi.step), ranks, pmi_failure_callbacks(pmi.node, std::move(failed)));
  if (!server) return Error{server.error().code, "cannot start the PMI server: " + server.message()};
  return server;
}

}  // namespace corral::node
