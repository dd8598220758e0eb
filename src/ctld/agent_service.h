// The agent stream's server (agent.proto, docs/interfaces/agent-stream.md): one call per
// node agent process, for as long as the agent is connected.
#pragma once

#include "agent.grpc.pb.h"
#include "ctld/caller_identity.h"
#include "ctld/controller.h"

namespace corral::ctld {

class AgentService final : public v1::Agents::Service {
 public:
  AgentService(Controller& ctl, const CallerIdentity& callers) : ctl_(ctl), callers_(callers) {}

  grpc::Status Stream(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) override;

 private:
  Controller& ctl_;
  const CallerIdentity& callers_;
};

}  // namespace corral::ctld
