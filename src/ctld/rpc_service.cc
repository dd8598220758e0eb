#include "ctld/rpc_service.h"

#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "job/hmac_key.h"
#include "net/grpc_credential.h"

namespace corral::ctld {

namespace {
grpc::Status refused(const Result<Caller>& c) { return {grpc::StatusCode::UNAUTHENTICATED, c.message()}; }
const grpc::Status kWatchBehind{grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "watch ended: the client read too slowly and too much was queued for it"};
}  // namespace

// On the Unix socket the kernel says who connected; over TCP the request's credential
// does (forged, expired and replayed ones are refused). A refusal is logged with the peer's
// address and the reason.
Result<Caller> RpcService::caller(grpc::ServerContext* ctx) const {
  const std::string peer = ctx->peer();
  if (auto cred = peers_.lookup(peer)) return Caller{cred->uid, cred->gid};
  if ((peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) || creds_ == nullptr)
    return denied("cannot identify the caller: connect over corrald's Unix socket");
  auto id = net::caller_of(*ctx, *creds_);
  if (!id) {
    spdlog::warn("refused a request from {}: {}", peer, id.message());
    return denied(fmt::format("{} (requests over TCP need {})", id.message(), creds_->source()));
  }
  // A credential with no origin address still marks the caller as remote: an agent then
  // can claim no node (check_node_claim), which is the safe side.
  return Caller{id->uid, id->gid, id->origin.empty() ? "unknown" : id->origin};
}

grpc::Status RpcService::Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.submit(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::Cancel(grpc::ServerContext* ctx, const v1::CancelRequest* req, v1::CancelReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.cancel(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.list_jobs(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::ListJobTable(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::JobTable* rep) {
  auto c = caller(ctx);
  return c ? ctl_.list_job_table(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::JobInfo* rep) {
  auto c = caller(ctx);
  return c ? ctl_.get_job(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                               grpc::ServerWriter<v1::WatchReply>* writer) {
  auto c = caller(ctx);
  if (!c) return refused(c);
  std::shared_ptr<Subscriber> sub;
  if (auto st = ctl_.subscribe(*c, *req, &sub); !st.ok()) return st;
  for (;;) {
    v1::WatchReply rep;
    if (!sub->next(rep, 500)) return sub->overflowed() ? kWatchBehind : grpc::Status::OK;
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    if (rep.items_size() > 0 && !writer->Write(rep)) return grpc::Status::CANCELLED;
  }
}

grpc::Status RpcService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* req, v1::ListNodesReply* rep) {
  return ctl_.list_nodes(*req, rep);
}

grpc::Status RpcService::SetNodeState(grpc::ServerContext* ctx, const v1::NodeStateRequest* req,
                                      v1::NodeStateReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.set_node_state(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest* req,
                                     v1::GetTopologyReply* rep) {
  return ctl_.get_topology(*req, rep);
}

grpc::Status RpcService::HookQuery(grpc::ServerContext* ctx, const v1::HookQueryRequest* req, v1::HookQueryReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.hook_query(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::Ping(grpc::ServerContext* ctx, const v1::PingRequest*, v1::PingReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.ping(*c, rep) : refused(c);
}

grpc::Status RpcService::ListSteps(grpc::ServerContext* ctx, const v1::ListStepsRequest* req, v1::ListStepsReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.list_steps(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::History(grpc::ServerContext* ctx, const v1::HistoryRequest* req, v1::HistoryReply* rep) {
  auto c = caller(ctx);
  return c ? ctl_.history(*c, *req, rep) : refused(c);
}

grpc::Status RpcService::Shutdown(grpc::ServerContext* ctx, const v1::ShutdownRequest*, v1::ShutdownReply*) {
  auto c = caller(ctx);
  return c ? ctl_.shutdown(*c) : refused(c);
}

// The agent's stream: this thread reads, a second one writes the link's batches.
grpc::Status RpcService::AgentStream(grpc::ServerContext* ctx,
                                     grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) {
  auto c = caller(ctx);
  if (!c) return refused(c);
  auto session_key = job::generate_key();
  if (!session_key) return {grpc::StatusCode::INTERNAL, session_key.message()};
  if (!c->origin.empty()) {
    // Over TCP the agent cannot know who answers; it checks this before it obeys anything.
    // The credential also carries the connection's session key, which only the agent's
    // uid can decode (munged refuses everyone else).
    auto proof = creds_->encode_for(std::string(net::kControllerPayload) + *session_key, c->uid);
    if (!proof) return {grpc::StatusCode::UNAVAILABLE, "corrald cannot prove itself: " + proof.message()};
    ctx->AddInitialMetadata(std::string(net::kCredentialMetadataKey), *proof);
    // Sent now: the agent checks it before it sends its registration.
    stream->SendInitialMetadata();
  }
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) return {grpc::StatusCode::INVALID_ARGUMENT, "the first agent message must be register"};
  std::shared_ptr<AgentLink> link;
  if (auto st = ctl_.agent_register(*c, first.register_(), ctx, &link, first.output(), std::move(*session_key));
      !st.ok())
    return st;
  std::thread writer([&] {
    v1::ControllerMessage out;
    while (link->next(out, 1000)) {
      if (out.ByteSizeLong() == 0) continue;
      if (!stream->Write(out)) break;
      out.Clear();
    }
  });
  v1::AgentMessage msg;
  while (stream->Read(&msg)) {
    ctl_.agent_message(*link, msg);
    msg.Clear();
  }
  link->detach();
  writer.join();
  ctl_.agent_disconnected(*link);
  return grpc::Status::OK;
}

}  // namespace corral::ctld
