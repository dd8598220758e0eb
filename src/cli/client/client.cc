#include "cli/client/client.h"

#include <sys/un.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "client.grpc.pb.h"
#include "common.pb.h"
#include "net/grpc_credential.h"
#include "net/tls.h"

namespace corral::cli {

namespace {

constexpr double kUnaryDeadline = 10.0;
constexpr double kLongUnaryDeadline = 60.0;

std::string unreachable(const std::string& uri, const std::string& reason) {
  return fmt::format("cannot reach the controller at {}: {} (is corrald running? set CORRAL_URI or --uri)", uri,
                     reason);
}

Error to_error(const grpc::Status& st, const std::string& uri) {
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return {Errc::unavailable, unreachable(uri, short_reason(st.error_message()))};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {Errc::unavailable, unreachable(uri, "no answer within the deadline")};
    case grpc::StatusCode::NOT_FOUND:
      return not_found(st.error_message());
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return denied(st.error_message());
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return invalid(st.error_message());
    case grpc::StatusCode::ALREADY_EXISTS:
      return {Errc::already_exists, st.error_message()};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {Errc::resource_exhausted, st.error_message()};
    default:
      return {Errc::internal, st.error_message().empty()
                                  ? fmt::format("rpc failed (gRPC status {})", static_cast<int>(st.error_code()))
                                  : st.error_message()};
  }
}

void set_deadline(grpc::ClientContext& ctx, double seconds) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<long>(seconds * 1000)));
}

}  // namespace

std::string short_reason(const std::string& message) {
  for (const char* known :
       {"Connection refused", "No such file or directory", "Permission denied", "Connection reset by peer"}) {
    if (message.find(known) != std::string::npos) {
      std::string reason = known;
      reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
      return reason;
    }
  }
  return message;
}

// Over TCP corrald and the step managers know the caller only from a credential
// (net/credentials.h), one per request: MUNGE's, or corral-authd's with CORRAL_AUTH=cluster-key.
Status authenticate(grpc::ClientContext& ctx, const std::string& uri) {
  if (!net::over_network(uri)) return {};
  auto config = net::client_auth_config();
  if (!config) return config.error();
  auto creds = net::make_credentials(*config);
  if (!creds) return creds.error();
  return net::add_credential(ctx, uri, **creds);
}

Result<std::shared_ptr<grpc::Channel>> client_channel(const std::string& target, bool own_connection,
                                                      const Unreachable& unreachable) {
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (target.rfind("unix:", 0) == 0 && target.size() - 5 > kMaxSocketPath)
    return Error{Errc::unavailable,
                 unreachable(fmt::format("the socket path is {} bytes long, longer than a Unix socket address "
                                         "holds ({})",
                                         target.size() - 5, kMaxSocketPath))};
  const char* ca = std::getenv("CORRAL_TLS_CA");
  auto creds = net::channel_credentials(ca != nullptr ? ca : "", target);
  if (!creds) return Error{creds.error().code, creds.message() + " (CORRAL_TLS_CA)"};
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(-1);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, *creds, args);
}

std::string resolve_uri(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  if (const char* env = std::getenv("CORRAL_URI"); env && *env) return env;
  return std::string(kDefaultUri);
}

// ---------------------------------------------------------------- WatchStream

struct WatchStream::Impl {
  std::string uri;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pb::WatchReply>> reader;
};

WatchStream::WatchStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WatchStream::~WatchStream() {
  if (impl_ && impl_->reader) {
    impl_->ctx.TryCancel();
    (void)impl_->reader->Finish();
  }
}

bool WatchStream::read(pb::WatchReply& reply) { return impl_->reader->Read(&reply); }

Status WatchStream::finish() {
  grpc::Status st = impl_->reader->Finish();
  impl_->reader.reset();
  if (st.ok()) return {};
  return to_error(st, impl_->uri);
}

void WatchStream::cancel() { impl_->ctx.TryCancel(); }

// ---------------------------------------------------------------- Client

struct Client::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Controller::Stub> stub;
};

Client::Client(std::string uri) : uri_(std::move(uri)), stub_(std::make_unique<Stub>()) {
  // Without a channel every call returns why (setup_).
  auto channel = client_channel(uri_, false, [this](const std::string& why) { return unreachable(uri_, why); });
  if (!channel) {
    setup_ = channel.error();
    return;
  }
  stub_->channel = std::move(*channel);
  stub_->stub = pb::Controller::NewStub(stub_->channel);
}

Client::~Client() = default;

namespace {

template <class Req, class Reply>
using RpcMethod = grpc::Status (pb::Controller::Stub::*)(grpc::ClientContext*, const Req&, Reply*);

template <class Req, class Reply>
Result<Reply> call_unary(const Status& setup, pb::Controller::Stub* stub, RpcMethod<Req, Reply> method, const Req& req,
                         const std::string& uri, double deadline) {
  if (!setup) return setup.error();
  grpc::ClientContext ctx;
  set_deadline(ctx, deadline);
  if (auto st = authenticate(ctx, uri); !st) return st.error();
  Reply reply;
  grpc::Status st = (stub->*method)(&ctx, req, &reply);
  if (!st.ok()) return to_error(st, uri);
  return reply;
}

}  // namespace

Result<pb::SubmitReply> Client::submit(const pb::SubmitRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::Submit, req, uri_, kUnaryDeadline);
}
Result<pb::CancelReply> Client::cancel(const pb::CancelRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::Cancel, req, uri_, kUnaryDeadline);
}
Result<pb::ListJobsReply> Client::list_jobs(const pb::ListJobsRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::ListJobs, req, uri_, kUnaryDeadline);
}
Result<pb::JobTable> Client::list_job_table(const pb::ListJobsRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::ListJobTable, req, uri_, kUnaryDeadline);
}
Result<pb::JobInfo> Client::get_job(const pb::GetJobRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::GetJob, req, uri_, kUnaryDeadline);
}
Result<pb::ListNodesReply> Client::list_nodes(const pb::ListNodesRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::ListNodes, req, uri_, kUnaryDeadline);
}
Result<pb::NodeStateReply> Client::set_node_state(const pb::NodeStateRequest& req) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::SetNodeState, req, uri_, kUnaryDeadline);
}
Result<pb::GetTopologyReply> Client::get_topology(const std::string& name) {
  pb::GetTopologyRequest req;
  req.set_name(name);
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::GetTopology, req, uri_, kUnaryDeadline);
}

Result<std::string> Client::hook_query(const std::string& hook, const std::string& what, const std::string& args_json) {
  pb::HookQueryRequest req;
  req.set_hook(hook);
  req.set_what(what);
  req.set_args_json(args_json);
  auto rep = call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::HookQuery, req, uri_, kUnaryDeadline);
  if (!rep) return rep.error();
  return std::move(*rep->mutable_json());
}

Result<pb::ListStepsReply> Client::list_steps(uint64_t jobid) {
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::ListSteps, req, uri_, kUnaryDeadline);
}

Result<pb::HistoryReply> Client::history(const pb::HistoryRequest& req) {
  // A site's whole history may be asked for: give it longer than the other calls.
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::History, req, uri_, kLongUnaryDeadline);
}

Result<pb::PingReply> Client::ping(double timeout_seconds) {
  return call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::Ping, pb::PingRequest{}, uri_, timeout_seconds);
}

Status Client::shutdown(double timeout_seconds) {
  auto r = call_unary(setup_, stub_->stub.get(), &pb::Controller::Stub::Shutdown, pb::ShutdownRequest{}, uri_,
                      timeout_seconds);
  return r.status();
}

Result<std::unique_ptr<WatchStream>> Client::watch(const pb::WatchRequest& req) {
  auto impl = std::make_unique<WatchStream::Impl>();
  impl->uri = uri_;
  if (!setup_) return setup_.error();
  if (auto st = authenticate(impl->ctx, uri_); !st) return st.error();
  impl->reader = stub_->stub->Watch(&impl->ctx, req);
  return std::make_unique<WatchStream>(std::move(impl));
}

}  // namespace corral::cli
