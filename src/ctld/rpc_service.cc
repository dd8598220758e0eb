#include "ctld/rpc_service.h"

#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/grpc_status.h"

namespace corral::ctld {

namespace {
const grpc::Status kWatchBehind{grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "watch ended: the client read too slowly and too much was queued for it"};
}  // namespace

template <class Call>
grpc::Status RpcService::as_caller(grpc::ServerContext* ctx, Call&& call) {
  auto c = callers_.of(ctx);
  return c ? net::to_grpc(call(*c)) : refused(c);
}

grpc::Status RpcService::Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.submit(c, *req, rep); });
}

grpc::Status RpcService::Cancel(grpc::ServerContext* ctx, const v1::CancelRequest* req, v1::CancelReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.cancel(c, *req, rep); });
}

grpc::Status RpcService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.list_jobs(c, *req, rep); });
}

grpc::Status RpcService::ListJobTable(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::JobTable* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.list_job_table(c, *req, rep); });
}

grpc::Status RpcService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::JobInfo* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.get_job(c, *req, rep); });
}

grpc::Status RpcService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                               grpc::ServerWriter<v1::WatchReply>* writer) {
  auto c = callers_.of(ctx);
  if (!c) return refused(c);
  std::shared_ptr<Subscriber> sub;
  if (auto st = ctl_.subscribe(*c, *req, &sub); !st.ok()) return net::to_grpc(st);
  for (;;) {
    v1::WatchReply rep;
    if (!sub->next(rep, 500)) return sub->overflowed() ? kWatchBehind : grpc::Status::OK;
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    if (rep.items_size() > 0 && !writer->Write(rep)) return grpc::Status::CANCELLED;
  }
}

grpc::Status RpcService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* req, v1::ListNodesReply* rep) {
  return net::to_grpc(ctl_.list_nodes(*req, rep));
}

grpc::Status RpcService::SetNodeState(grpc::ServerContext* ctx, const v1::NodeStateRequest* req,
                                      v1::NodeStateReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.set_node_state(c, *req, rep); });
}

grpc::Status RpcService::GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest* req,
                                     v1::GetTopologyReply* rep) {
  return net::to_grpc(ctl_.get_topology(*req, rep));
}

grpc::Status RpcService::HookQuery(grpc::ServerContext* ctx, const v1::HookQueryRequest* req, v1::HookQueryReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.hook_query(c, *req, rep); });
}

grpc::Status RpcService::Ping(grpc::ServerContext* ctx, const v1::PingRequest*, v1::PingReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.ping(c, rep); });
}

grpc::Status RpcService::ListSteps(grpc::ServerContext* ctx, const v1::ListStepsRequest* req, v1::ListStepsReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.list_steps(c, *req, rep); });
}

grpc::Status RpcService::History(grpc::ServerContext* ctx, const v1::HistoryRequest* req, v1::HistoryReply* rep) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.history(c, *req, rep); });
}

grpc::Status RpcService::Shutdown(grpc::ServerContext* ctx, const v1::ShutdownRequest*, v1::ShutdownReply*) {
  return as_caller(ctx, [&](const Caller& c) { return ctl_.shutdown(c); });
}

}  // namespace corral::ctld
