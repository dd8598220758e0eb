// The server side of StepService.LaunchTasks: pumps one parent's stream into StepNode on
// the event loop (launch, then deliver) and the subtree's LaunchUp messages back. Blocks
// the calling gRPC thread until the subtree is done or the parent cancels (abandon).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "steps.pb.h"

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

class StepNode;

grpc::Status serve_launch_tasks(EventLoop& loop, StepNode& node, grpc::ServerContext* ctx,
                                grpc::ServerReaderWriter<v1::LaunchUp, v1::LaunchDown>* stream);

}  // namespace corral::node
