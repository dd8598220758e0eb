// RunStep over the agent's Unix socket without gRPC (net/step_frames.h): the transport of
// StepStream for step managers on this host. No gRPC channel, threads or HTTP/2 for a
// short step: a connect, one write and the reads of the answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cli/client/step_client.h"

namespace corral::cli {

// Connects to `path` and sends the preface. `max_frame`: the largest frame accepted.
Result<std::unique_ptr<StepStream::Impl>> open_step_socket(const std::string& path, uint64_t jobid, size_t max_frame);

}  // namespace corral::cli
