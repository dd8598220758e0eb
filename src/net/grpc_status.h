// corral's errors as gRPC statuses, for the RPC layers of corrald and corral-node (the
// code behind them returns Status values and never names gRPC).
#pragma once

#include <grpcpp/support/status.h>

#include "util/result.h"

namespace corral::net {

grpc::Status to_grpc(const Error& e);
grpc::Status to_grpc(const Status& st);
// The number of to_grpc(st)'s code, for status frames of corral's own protocols.
int grpc_code(const Status& st);

}  // namespace corral::net
