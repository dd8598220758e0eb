#include "net/rpc_frames.h"

namespace corral::net {

std::string rpc_call_payload(RpcMethod method, std::string_view request) {
  std::string out(1, static_cast<char>(method));
  out.append(request);
  return out;
}

std::optional<RpcCall> parse_rpc_call(std::string_view payload) {
  if (payload.empty()) return std::nullopt;
  const auto m = static_cast<uint8_t>(payload[0]);
  if (m < static_cast<uint8_t>(RpcMethod::submit) || m > static_cast<uint8_t>(RpcMethod::watch)) return std::nullopt;
  return RpcCall{static_cast<RpcMethod>(m), payload.substr(1)};
}

}  // namespace corral::net
