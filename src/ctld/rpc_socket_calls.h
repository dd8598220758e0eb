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

}  // namespace corral::ctld
