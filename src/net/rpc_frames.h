// The controller's unary calls without gRPC, for clients on corrald's own Unix socket (the
// `corral` command): a connection that begins with kRpcPreface carries, in step_frames.h's
// framing, calls one after another:
//   client -> corrald: a kStepFrameMessage whose payload is [method: 1 byte][request]
//   corrald -> client: a kStepFrameMessage with the reply (only on success), then a
//                      kStepFrameStatus ([code: 1 byte, gRPC's numbering][message])
// The caller is who SO_PEERCRED says, as for gRPC on the same socket. A command then starts
// no gRPC runtime (its threads, event engine and HTTP/2) to make one call. Every method of
// the Controller service is here. A `watch` call makes the connection a stream: corrald
// sends a kStepFrameMessage per WatchReply, then the status frame, and closes it. Over TCP
// the methods stay on gRPC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/step_frames.h"

namespace corral::net {

inline constexpr std::string_view kRpcPreface = "CORRAL-RPC/1\n";

// The methods this protocol carries (client.proto's Controller service). Numbers are the
// wire's: never reuse one.
enum class RpcMethod : uint8_t {
  submit = 1,
  cancel = 2,
  list_jobs = 3,
  list_job_table = 4,
  get_job = 5,
  list_nodes = 6,
  ping = 7,
  set_node_state = 8,
  get_topology = 9,
  hook_query = 10,
  list_steps = 11,
  history = 12,
  shutdown = 13,
  watch = 14,  // the last: parse_rpc_call takes submit..watch
};

// A call frame's payload.
std::string rpc_call_payload(RpcMethod method, std::string_view request);
struct RpcCall {
  RpcMethod method;
  std::string_view request;  // into the payload
};
// nullopt: empty, or a method this side does not know.
std::optional<RpcCall> parse_rpc_call(std::string_view payload);

}  // namespace corral::net
