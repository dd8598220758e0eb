#include "cli/client/client.h"

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/support/status_code_enum.h>  // the codes' numbering only: nothing of gRPC is linked

#include "cli/client/rpc_socket_client.h"
#include "cli/client/socket_watch.h"
#include "common.pb.h"
#include "net/message_limits.h"
#include "net/rpc_frames.h"
#include "net/unix_connect.h"

namespace corral::cli {

namespace {

constexpr double kUnaryDeadline = 10.0;
constexpr double kLongUnaryDeadline = 60.0;

std::string unreachable(const std::string& uri, const std::string& reason) {
  return fmt::format("cannot reach the controller at {}: {} (is corrald running? set CORRAL_URI or --uri)", uri,
                     reason);
}

// `code`: gRPC's numbering, from gRPC or from corrald's socket.
Error to_error(int code, const std::string& message, const std::string& uri) {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::UNAVAILABLE:
      return {Errc::unavailable, unreachable(uri, short_reason(message))};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {Errc::unavailable, unreachable(uri, "no answer within the deadline")};
    case grpc::StatusCode::NOT_FOUND:
      return not_found(message);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return denied(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return invalid(message);
    case grpc::StatusCode::ALREADY_EXISTS:
      return {Errc::already_exists, message};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {Errc::resource_exhausted, message};
    default:
      return {Errc::internal, message.empty() ? fmt::format("rpc failed (gRPC status {})", code) : message};
  }
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

std::string resolve_uri(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  if (const char* env = std::getenv("CORRAL_URI"); env && *env) return env;
  return std::string(kDefaultUri);
}

// ---------------------------------------------------------------- WatchStream

WatchStream::WatchStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WatchStream::~WatchStream() = default;
bool WatchStream::read(pb::WatchReply& reply) { return impl_->read(reply); }
Status WatchStream::finish() { return impl_->finish(); }
void WatchStream::cancel() { impl_->cancel(); }

namespace {

// Watch through gRPC: a controller over TCP, or CORRAL_RPC_TRANSPORT=grpc.
class GrpcWatch final : public WatchStream::Impl {
 public:
  GrpcWatch(std::unique_ptr<GrpcStream> stream, std::string uri) : stream_(std::move(stream)), uri_(std::move(uri)) {}
  bool read(pb::WatchReply& reply) override {
    std::string bytes;
    return stream_->read(bytes) && reply.ParseFromString(bytes);
  }
  Status finish() override {
    GrpcStatus st = stream_->finish();
    if (st.code == 0) return {};
    return to_error(st.code, st.message, uri_);
  }
  void cancel() override { stream_->cancel(); }

 private:
  std::unique_ptr<GrpcStream> stream_;
  std::string uri_;
};

}  // namespace

// ---------------------------------------------------------------- Client

struct Client::Stub {
  std::mutex grpc_mu;
  bool made = false;  // under grpc_mu: the channel was tried
  Status setup;       // why the channel could not be made (an unreadable CORRAL_TLS_CA): every call says so
  std::shared_ptr<GrpcChannel> channel;
  std::optional<std::string> socket_path;  // unix: URIs, unless CORRAL_RPC_TRANSPORT=grpc
  std::mutex socket_mu;
  std::unique_ptr<RpcSocketClient> socket;
};

Client::Client(std::string uri) : uri_(std::move(uri)), stub_(std::make_unique<Stub>()) {
  stub_->socket_path = net::own_protocol_socket(uri_, "CORRAL_RPC_TRANSPORT");
  if (stub_->socket_path) stub_->socket = std::make_unique<RpcSocketClient>(*stub_->socket_path, net::kMaxClientReply);
}

Client::~Client() = default;

namespace {

// The gRPC channel, made on first use (a command whose calls all go over the socket starts
// no gRPC runtime); null with the reason in `setup` when it cannot be made.
GrpcChannel* grpc_channel(Client& client, auto& s) {
  std::lock_guard lock(s.grpc_mu);
  if (!s.made) {
    s.made = true;
    const std::string& uri = client.uri();
    auto channel = open_grpc_channel(uri, false, [&uri](const std::string& why) { return unreachable(uri, why); });
    if (!channel)
      s.setup = channel.error();
    else
      s.channel = std::move(*channel);
  }
  return s.channel.get();
}

// Over corrald's socket when the URI is one, else through gRPC as `method`.
template <class Reply, class Req>
Result<Reply> call(Client& client, auto& s, net::RpcMethod framed, const char* method, const Req& req,
                   double deadline) {
  RpcSocketClient::Answer a;
  if (s.socket) {
    std::lock_guard lock(s.socket_mu);
    auto answer = s.socket->call(framed, req.SerializeAsString(), deadline);
    if (!answer) {
      if (answer.error().code == Errc::unavailable)
        return Error{Errc::unavailable, unreachable(client.uri(), answer.message())};
      return answer.error();
    }
    a = std::move(*answer);
  } else {
    GrpcChannel* channel = grpc_channel(client, s);
    if (channel == nullptr) return s.setup.error();
    auto st = channel->unary(method, req.SerializeAsString(), deadline, &a.reply);
    if (!st) return st.error();
    a.code = st->code;
    a.message = std::move(st->message);
  }
  if (a.code != 0) return to_error(a.code, a.message, client.uri());
  Reply reply;
  if (!reply.ParseFromString(a.reply)) return Error{Errc::internal, "corrald sent a malformed reply"};
  return reply;
}

}  // namespace

Result<pb::SubmitReply> Client::submit(const pb::SubmitRequest& req) {
  return call<pb::SubmitReply>(*this, *stub_, net::RpcMethod::submit, "/corral.v1.Controller/Submit", req,
                               kUnaryDeadline);
}
Result<pb::CancelReply> Client::cancel(const pb::CancelRequest& req) {
  return call<pb::CancelReply>(*this, *stub_, net::RpcMethod::cancel, "/corral.v1.Controller/Cancel", req,
                               kUnaryDeadline);
}
Result<pb::ListJobsReply> Client::list_jobs(const pb::ListJobsRequest& req) {
  return call<pb::ListJobsReply>(*this, *stub_, net::RpcMethod::list_jobs, "/corral.v1.Controller/ListJobs", req,
                                 kUnaryDeadline);
}
Result<pb::JobTable> Client::list_job_table(const pb::ListJobsRequest& req) {
  return call<pb::JobTable>(*this, *stub_, net::RpcMethod::list_job_table, "/corral.v1.Controller/ListJobTable", req,
                            kUnaryDeadline);
}
Result<pb::JobInfo> Client::get_job(const pb::GetJobRequest& req) {
  return call<pb::JobInfo>(*this, *stub_, net::RpcMethod::get_job, "/corral.v1.Controller/GetJob", req, kUnaryDeadline);
}
Result<pb::ListNodesReply> Client::list_nodes(const pb::ListNodesRequest& req) {
  return call<pb::ListNodesReply>(*this, *stub_, net::RpcMethod::list_nodes, "/corral.v1.Controller/ListNodes", req,
                                  kUnaryDeadline);
}
Result<pb::NodeStateReply> Client::set_node_state(const pb::NodeStateRequest& req) {
  return call<pb::NodeStateReply>(*this, *stub_, net::RpcMethod::set_node_state, "/corral.v1.Controller/SetNodeState",
                                  req, kUnaryDeadline);
}
Result<pb::GetTopologyReply> Client::get_topology(const std::string& name) {
  pb::GetTopologyRequest req;
  req.set_name(name);
  return call<pb::GetTopologyReply>(*this, *stub_, net::RpcMethod::get_topology, "/corral.v1.Controller/GetTopology",
                                    req, kUnaryDeadline);
}

Result<std::string> Client::hook_query(const std::string& hook, const std::string& what, const std::string& args_json) {
  pb::HookQueryRequest req;
  req.set_hook(hook);
  req.set_what(what);
  req.set_args_json(args_json);
  auto rep = call<pb::HookQueryReply>(*this, *stub_, net::RpcMethod::hook_query, "/corral.v1.Controller/HookQuery", req,
                                      kUnaryDeadline);
  if (!rep) return rep.error();
  return std::move(*rep->mutable_json());
}

Result<pb::ListStepsReply> Client::list_steps(uint64_t jobid) {
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  return call<pb::ListStepsReply>(*this, *stub_, net::RpcMethod::list_steps, "/corral.v1.Controller/ListSteps", req,
                                  kUnaryDeadline);
}

Result<pb::HistoryReply> Client::history(const pb::HistoryRequest& req) {
  // A site's whole history may be asked for: give it longer than the other calls.
  return call<pb::HistoryReply>(*this, *stub_, net::RpcMethod::history, "/corral.v1.Controller/History", req,
                                kLongUnaryDeadline);
}

Result<pb::PingReply> Client::ping(double timeout_seconds) {
  return call<pb::PingReply>(*this, *stub_, net::RpcMethod::ping, "/corral.v1.Controller/Ping", pb::PingRequest{},
                             timeout_seconds);
}

Status Client::shutdown(double timeout_seconds) {
  auto r = call<pb::ShutdownReply>(*this, *stub_, net::RpcMethod::shutdown, "/corral.v1.Controller/Shutdown",
                                   pb::ShutdownRequest{}, timeout_seconds);
  return r.status();
}

Result<std::unique_ptr<WatchStream>> Client::watch(const pb::WatchRequest& req) {
  if (stub_->socket_path) {
    auto impl = open_socket_watch(
        *stub_->socket_path, req.SerializeAsString(), net::kMaxClientReply,
        [uri = uri_](int code, const std::string& message) -> Status { return to_error(code, message, uri); });
    if (!impl) return Error{impl.error().code, unreachable(uri_, impl.message())};
    return std::make_unique<WatchStream>(std::move(*impl));
  }
  GrpcChannel* channel = grpc_channel(*this, *stub_);
  if (channel == nullptr) return stub_->setup.error();
  auto stream = channel->server_stream("/corral.v1.Controller/Watch", req.SerializeAsString());
  if (!stream) return stream.error();
  return std::make_unique<WatchStream>(std::make_unique<GrpcWatch>(std::move(*stream), uri_));
}

}  // namespace corral::cli
