#include "cli/client/client.h"

#include <sys/un.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cli/client/rpc_socket_client.h"
#include "client.grpc.pb.h"
#include "common.pb.h"
#include "net/grpc_credential.h"
#include "net/message_limits.h"
#include "net/rpc_frames.h"
#include "net/tls.h"
#include "net/unix_connect.h"

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
  std::mutex grpc_mu;
  bool made = false;  // under grpc_mu: the channel was tried
  Status setup;       // why the channel could not be made (an unreadable CORRAL_TLS_CA): every call says so
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Controller::Stub> stub;
  std::mutex socket_mu;
  std::unique_ptr<RpcSocketClient> socket;  // unix: URIs, unless CORRAL_RPC_TRANSPORT=grpc
};

Client::Client(std::string uri) : uri_(std::move(uri)), stub_(std::make_unique<Stub>()) {
  if (auto path = net::own_protocol_socket(uri_, "CORRAL_RPC_TRANSPORT"))
    stub_->socket = std::make_unique<RpcSocketClient>(std::move(*path), net::kMaxClientReply);
}

Client::~Client() = default;

namespace {

template <class Req, class Reply>
using RpcMethod = grpc::Status (pb::Controller::Stub::*)(grpc::ClientContext*, const Req&, Reply*);

// The gRPC stub, made on first use (a command whose calls all go over the socket starts no
// gRPC runtime); null with the reason in `setup` when it cannot be made.
pb::Controller::Stub* grpc_stub(Client& client, auto& s) {
  std::lock_guard lock(s.grpc_mu);
  if (!s.made) {
    s.made = true;
    const std::string& uri = client.uri();
    auto channel = client_channel(uri, false, [&uri](const std::string& why) { return unreachable(uri, why); });
    if (!channel) {
      s.setup = channel.error();
    } else {
      s.channel = std::move(*channel);
      s.stub = pb::Controller::NewStub(s.channel);
    }
  }
  return s.stub.get();
}

template <class Req, class Reply>
Result<Reply> call_grpc(Client& client, auto& s, RpcMethod<Req, Reply> method, const Req& req, double deadline) {
  pb::Controller::Stub* stub = grpc_stub(client, s);
  if (stub == nullptr) return s.setup.error();
  grpc::ClientContext ctx;
  set_deadline(ctx, deadline);
  if (auto st = authenticate(ctx, client.uri()); !st) return st.error();
  Reply reply;
  grpc::Status st = (stub->*method)(&ctx, req, &reply);
  if (!st.ok()) return to_error(st, client.uri());
  return reply;
}

// Over corrald's socket when the URI is one, else through gRPC.
template <class Req, class Reply>
Result<Reply> call_unary(Client& client, auto& s, net::RpcMethod framed, RpcMethod<Req, Reply> method, const Req& req,
                         double deadline) {
  if (!s.socket) return call_grpc(client, s, method, req, deadline);
  std::lock_guard lock(s.socket_mu);
  auto a = s.socket->call(framed, req.SerializeAsString(), deadline);
  if (!a) {
    if (a.error().code == Errc::unavailable) return Error{Errc::unavailable, unreachable(client.uri(), a.message())};
    return a.error();
  }
  if (a->code != 0) return to_error(grpc::Status(static_cast<grpc::StatusCode>(a->code), a->message), client.uri());
  Reply reply;
  if (!reply.ParseFromString(a->reply)) return Error{Errc::internal, "corrald sent a malformed reply"};
  return reply;
}

}  // namespace

Result<pb::SubmitReply> Client::submit(const pb::SubmitRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::submit, &pb::Controller::Stub::Submit, req, kUnaryDeadline);
}
Result<pb::CancelReply> Client::cancel(const pb::CancelRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::cancel, &pb::Controller::Stub::Cancel, req, kUnaryDeadline);
}
Result<pb::ListJobsReply> Client::list_jobs(const pb::ListJobsRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::list_jobs, &pb::Controller::Stub::ListJobs, req, kUnaryDeadline);
}
Result<pb::JobTable> Client::list_job_table(const pb::ListJobsRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::list_job_table, &pb::Controller::Stub::ListJobTable, req,
                    kUnaryDeadline);
}
Result<pb::JobInfo> Client::get_job(const pb::GetJobRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::get_job, &pb::Controller::Stub::GetJob, req, kUnaryDeadline);
}
Result<pb::ListNodesReply> Client::list_nodes(const pb::ListNodesRequest& req) {
  return call_unary(*this, *stub_, net::RpcMethod::list_nodes, &pb::Controller::Stub::ListNodes, req, kUnaryDeadline);
}
Result<pb::NodeStateReply> Client::set_node_state(const pb::NodeStateRequest& req) {
  return call_grpc(*this, *stub_, &pb::Controller::Stub::SetNodeState, req, kUnaryDeadline);
}
Result<pb::GetTopologyReply> Client::get_topology(const std::string& name) {
  pb::GetTopologyRequest req;
  req.set_name(name);
  return call_grpc(*this, *stub_, &pb::Controller::Stub::GetTopology, req, kUnaryDeadline);
}

Result<std::string> Client::hook_query(const std::string& hook, const std::string& what, const std::string& args_json) {
  pb::HookQueryRequest req;
  req.set_hook(hook);
  req.set_what(what);
  req.set_args_json(args_json);
  auto rep = call_grpc(*this, *stub_, &pb::Controller::Stub::HookQuery, req, kUnaryDeadline);
  if (!rep) return rep.error();
  return std::move(*rep->mutable_json());
}

Result<pb::ListStepsReply> Client::list_steps(uint64_t jobid) {
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  return call_grpc(*this, *stub_, &pb::Controller::Stub::ListSteps, req, kUnaryDeadline);
}

Result<pb::HistoryReply> Client::history(const pb::HistoryRequest& req) {
  // A site's whole history may be asked for: give it longer than the other calls.
  return call_grpc(*this, *stub_, &pb::Controller::Stub::History, req, kLongUnaryDeadline);
}

Result<pb::PingReply> Client::ping(double timeout_seconds) {
  return call_unary(*this, *stub_, net::RpcMethod::ping, &pb::Controller::Stub::Ping, pb::PingRequest{},
                    timeout_seconds);
}

Status Client::shutdown(double timeout_seconds) {
  auto r = call_grpc(*this, *stub_, &pb::Controller::Stub::Shutdown, pb::ShutdownRequest{}, timeout_seconds);
  return r.status();
}

Result<std::unique_ptr<WatchStream>> Client::watch(const pb::WatchRequest& req) {
  auto impl = std::make_unique<WatchStream::Impl>();
  impl->uri = uri_;
  pb::Controller::Stub* stub = grpc_stub(*this, *stub_);
  if (stub == nullptr) return stub_->setup.error();
  if (auto st = authenticate(impl->ctx, uri_); !st) return st.error();
  impl->reader = stub->Watch(&impl->ctx, req);
  return std::make_unique<WatchStream>(std::move(impl));
}

}  // namespace corral::cli
