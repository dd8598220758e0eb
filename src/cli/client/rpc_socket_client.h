// The controller's unary calls over its Unix socket without gRPC (net/rpc_frames.h): what
// Client uses for a unix: URI, so a command makes its call with a connect and a write
// instead of starting gRPC's runtime. One connection per Client, calls one after another.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "net/rpc_frames.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::cli {

class RpcSocketClient {
 public:
  // `path`: the socket; `max_reply`: the largest reply frame accepted.
  RpcSocketClient(std::string path, size_t max_reply) : path_(std::move(path)), max_reply_(max_reply) {}

  struct Answer {
    int code = 0;         // gRPC's numbering; 0: `reply` holds the reply
    std::string message;  // the error's, when code != 0
    std::string reply;
  };
  // Connects on first use. An Errc::unavailable error says why the socket could not be
  // reached or the answer not read within `deadline_seconds`, in a few words
  // ("connection refused", "no answer within the deadline").
  Result<Answer> call(net::RpcMethod method, std::string_view request, double deadline_seconds);

 private:
  // corrald closes a connection idle for a minute (ctld/rpc_socket.h); one idle for half
  // that is made afresh rather than risk a call meeting that close.
  static constexpr std::chrono::seconds kReuseWithin{30};
  Status connect();
  std::string path_;
  size_t max_reply_;
  UniqueFd fd_;
  std::chrono::steady_clock::time_point last_answer_;
};

}  // namespace corral::cli
