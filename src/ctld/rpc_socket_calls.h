// What each method of net/rpc_frames.h does: the request parsed, the same Controller call
// as RpcService makes for gRPC, the reply serialised.
#pragma once

#include <string>
#include <string_view>

#include "ctld/controller.h"
#include "net/rpc_frames.h"
#include "util/result.h"

namespace corral::ctld {

Status call_controller(Controller& ctl, const Caller& caller, net::RpcMethod method, std::string_view request,
                       std::string* reply);

// Where a watch over the socket sends its replies: `write` false once the client is gone;
// `gone` is asked between replies (the stream may be quiet for long).
struct WatchSink {
  virtual ~WatchSink() = default;
  virtual bool write(const std::string& reply) = 0;
  virtual bool gone() = 0;
};
// A `watch` call: the request parsed, subscribed as RpcService::Watch does, each WatchReply
// serialised into `sink` until the subscription ends or the client goes. The status ends
// the stream.
Status watch_controller(Controller& ctl, const Caller& caller, std::string_view request, WatchSink& sink);

}  // namespace corral::ctld
