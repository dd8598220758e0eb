// A Watch over corrald's Unix socket (net/rpc_frames.h): one connection whose call is
// `watch`; corrald answers with a WatchReply frame per batch of items and ends with a status.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cli/client/client.h"
#include "util/result.h"

namespace corral::cli {

// How the stream's end reads: a status from corrald (`code`, gRPC's numbering, and its
// message), or the connection lost without one (`code` 14, UNAVAILABLE, and why).
using WatchEnd = std::function<Status(int code, const std::string& message)>;

// Connects to `path` and sends the call. Errc::unavailable with the reason in a few words
// when the socket cannot be reached.
Result<std::unique_ptr<WatchStream::Impl>> open_socket_watch(const std::string& path, std::string_view request,
                                                             size_t max_reply, WatchEnd end);

}  // namespace corral::cli
