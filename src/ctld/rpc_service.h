// The controller's client API (client.proto): identifies the caller from the
// connection's credentials and forwards to Controller. The agent stream is AgentService.
#pragma once

#include "client.grpc.pb.h"
#include "ctld/caller_identity.h"
#include "ctld/controller.h"

namespace corral::ctld {

class RpcService final : public v1::Controller::Service {
 public:
  RpcService(Controller& ctl, const CallerIdentity& callers) : ctl_(ctl), callers_(callers) {}

  grpc::Status Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitReply* rep) override;
  grpc::Status Cancel(grpc::ServerContext* ctx, const v1::CancelRequest* req, v1::CancelReply* rep) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsReply* rep) override;
  grpc::Status ListJobTable(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::JobTable* rep) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::JobInfo* rep) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::WatchReply>* writer) override;
  grpc::Status ListNodes(grpc::ServerContext* ctx, const v1::ListNodesRequest* req, v1::ListNodesReply* rep) override;
  grpc::Status SetNodeState(grpc::ServerContext* ctx, const v1::NodeStateRequest* req,
                            v1::NodeStateReply* rep) override;
  grpc::Status GetTopology(grpc::ServerContext* ctx, const v1::GetTopologyRequest* req,
                           v1::GetTopologyReply* rep) override;
  grpc::Status Ping(grpc::ServerContext* ctx, const v1::PingRequest* req, v1::PingReply* rep) override;
  grpc::Status HookQuery(grpc::ServerContext* ctx, const v1::HookQueryRequest* req, v1::HookQueryReply* rep) override;
  grpc::Status ListSteps(grpc::ServerContext* ctx, const v1::ListStepsRequest* req, v1::ListStepsReply* rep) override;
  grpc::Status History(grpc::ServerContext* ctx, const v1::HistoryRequest* req, v1::HistoryReply* rep) override;
  grpc::Status Shutdown(grpc::ServerContext* ctx, const v1::ShutdownRequest* req, v1::ShutdownReply* rep) override;

 private:
  // Runs `call(caller)` for an identified caller; an unidentified one is refused.
  template <class Call>
  grpc::Status as_caller(grpc::ServerContext* ctx, Call&& call);

  Controller& ctl_;
  const CallerIdentity& callers_;
};

}  // namespace corral::ctld
