// grpc_channel.h through gRPC itself: generic calls carrying the messages' bytes
// (grpc::ByteBuffer), in the synchronous style of the generated stubs.
#include "cli/client/grpc_channel.h"

#include <sys/un.h>

#include <chrono>
#include <cstdlib>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "net/credentials.h"
#include "net/grpc_credential.h"
#include "net/tls.h"

namespace corral::cli {

namespace {

grpc::ByteBuffer to_buffer(std::string_view bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

bool from_buffer(const grpc::ByteBuffer& buffer, std::string& out) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  out.clear();
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return true;
}

// A fresh credential for a call to `target` over the network; nothing on a Unix socket,
// where the kernel names the caller.
Status authenticate(grpc::ClientContext& ctx, const std::string& target) {
  if (!net::over_network(target)) return {};
  auto config = net::client_auth_config();
  if (!config) return config.error();
  auto creds = net::make_credentials(*config);
  if (!creds) return creds.error();
  return net::add_credential(ctx, target, **creds);
}

GrpcStatus status_of(const grpc::Status& st) { return {static_cast<int>(st.error_code()), st.error_message()}; }

// One call's stream; reading and writing as ClientReader / ClientReaderWriter allow.
class Stream final : public GrpcStream {
 public:
  Stream() = default;
  ~Stream() override {
    if (!finished_ && (reader_ || rw_)) {
      ctx_.TryCancel();
      (void)finish();
    }
  }
  void open_server(grpc::Channel& channel, const char* method, std::string_view request) {
    reader_.reset(grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
        &channel, grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::SERVER_STREAMING), &ctx_,
        to_buffer(request)));
  }
  void open_bidi(grpc::Channel& channel, const char* method) {
    rw_.reset(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
        &channel, grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::BIDI_STREAMING), &ctx_));
  }
  grpc::ClientContext& context() { return ctx_; }

  bool read(std::string& message) override {
    grpc::ByteBuffer buffer;
    const bool got = reader_ ? reader_->Read(&buffer) : rw_->Read(&buffer);
    return got && from_buffer(buffer, message);
  }
  bool write(std::string_view message) override { return rw_ && rw_->Write(to_buffer(message)); }
  bool writes_done() override { return rw_ && rw_->WritesDone(); }
  void cancel() override { ctx_.TryCancel(); }
  GrpcStatus finish() override {
    if (finished_) return status_;
    finished_ = true;
    status_ = status_of(reader_ ? reader_->Finish() : rw_->Finish());
    return status_;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> rw_;
  bool finished_ = false;
  GrpcStatus status_;
};

class Channel final : public GrpcChannel {
 public:
  Channel(std::shared_ptr<grpc::Channel> channel, std::string target)
      : channel_(std::move(channel)), target_(std::move(target)) {}

  Result<GrpcStatus> unary(const char* method, std::string_view request, double deadline_seconds,
                           std::string* reply) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<long>(deadline_seconds * 1000)));
    if (auto st = authenticate(ctx, target_); !st) return st.error();
    grpc::ByteBuffer out;
    grpc::Status st = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(), grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::NORMAL_RPC), &ctx,
        to_buffer(request), &out);
    if (st.ok() && !from_buffer(out, *reply)) return GrpcStatus{13, "the reply could not be read"};  // INTERNAL
    return status_of(st);
  }

  Result<std::unique_ptr<GrpcStream>> server_stream(const char* method, std::string_view request) override {
    auto s = std::make_unique<Stream>();
    if (auto st = authenticate(s->context(), target_); !st) return st.error();
    s->open_server(*channel_, method, request);
    return std::unique_ptr<GrpcStream>(std::move(s));
  }

  Result<std::unique_ptr<GrpcStream>> bidi_stream(const char* method) override {
    auto s = std::make_unique<Stream>();
    if (auto st = authenticate(s->context(), target_); !st) return st.error();
    s->open_bidi(*channel_, method);
    return std::unique_ptr<GrpcStream>(std::move(s));
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string target_;
};

}  // namespace

Result<std::shared_ptr<GrpcChannel>> open_grpc_channel(const std::string& target, bool own_connection,
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
  return std::shared_ptr<GrpcChannel>(
      std::make_shared<Channel>(grpc::CreateCustomChannel(target, *creds, args), target));
}

void hand_off_before(std::string_view, const std::string&) { ::unsetenv(kHandedOffEnv); }

}  // namespace corral::cli
