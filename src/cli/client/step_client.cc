#include "cli/client/step_client.h"

#include <cstdlib>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/support/status_code_enum.h>  // the codes' numbering only: nothing of gRPC is linked

#include "cli/client/client.h"
#include "cli/client/grpc_channel.h"
#include "cli/client/step_socket_client.h"
#include "common.pb.h"
#include "net/message_limits.h"
#include "net/unix_connect.h"

namespace corral::cli {

namespace {

std::string unreachable(uint64_t jobid, const std::string& address, const std::string& why) {
  return fmt::format(
      "cannot reach the step manager of job {} at {}: {} (has the job ended? see 'corral "
      "show {}')",
      jobid, address, why, jobid);
}

Error to_error(const GrpcStatus& st, uint64_t jobid, const std::string& address) {
  return step_rpc_error(st.code, st.message, jobid, address);
}

}  // namespace

Error step_rpc_error(int grpc_code, const std::string& message, uint64_t jobid, const std::string& address) {
  switch (static_cast<grpc::StatusCode>(grpc_code)) {
    case grpc::StatusCode::UNAVAILABLE:
      return {Errc::unavailable, unreachable(jobid, address, message.empty() ? "no answer" : short_reason(message))};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {Errc::unavailable, unreachable(jobid, address, "no answer within the deadline")};
    case grpc::StatusCode::CANCELLED:
      return {Errc::unavailable, fmt::format("the call to the step manager of job {} at {} was "
                                             "canceled",
                                             jobid, address)};
    case grpc::StatusCode::NOT_FOUND:
      return not_found(message);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return denied(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return invalid(message);
    case grpc::StatusCode::UNIMPLEMENTED:
      return {Errc::internal,
              fmt::format("the agent at {} does not serve steps (is it an older corral-node?)", address)};
    default:
      return {Errc::internal, message.empty() ? fmt::format("step manager of job {} at {}: rpc failed (gRPC "
                                                            "status {})",
                                                            jobid, address, grpc_code)
                                              : message};
  }
}

// ---------------------------------------------------------------- StepStream

StepStream::StepStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StepStream::~StepStream() = default;

bool StepStream::read(pb::StepServerMessage& msg) { return impl_->read(msg); }

Status StepStream::finish() { return impl_->finish(); }

bool StepStream::send(const pb::StepClientMessage& msg) { return impl_->send(msg); }

bool StepStream::Impl::send_create(const pb::StepSpec& spec) {
  pb::StepClientMessage msg;
  *msg.mutable_create() = spec;
  return send(msg);
}

bool StepStream::send_create(const pb::StepSpec& spec) { return impl_->send_create(spec); }

bool StepStream::send_stdin(std::string_view data) {
  pb::StepClientMessage msg;
  msg.set_stdin(std::string(data));
  return send(msg);
}

bool StepStream::send_stdin_eof() {
  pb::StepClientMessage msg;
  msg.set_stdin_eof(true);
  return send(msg);
}

bool StepStream::send_signal(int signal) {
  pb::StepClientMessage msg;
  msg.set_signal(signal);
  return send(msg);
}

bool StepStream::send_winsize(unsigned rows, unsigned cols) {
  pb::StepClientMessage msg;
  msg.mutable_winsize()->set_rows(rows);
  msg.mutable_winsize()->set_cols(cols);
  return send(msg);
}

void StepStream::close_writes() { impl_->close_writes(); }

void StepStream::cancel() { impl_->cancel(); }

namespace {

// RunStep through gRPC: TCP step managers, and CORRAL_STEP_TRANSPORT=grpc.
class GrpcStepStream final : public StepStream::Impl {
 public:
  GrpcStepStream(uint64_t jobid, std::string address, std::unique_ptr<GrpcStream> stream)
      : jobid_(jobid), address_(std::move(address)), stream_(std::move(stream)) {}
  bool read(pb::StepServerMessage& msg) override {
    std::string bytes;
    return stream_->read(bytes) && msg.ParseFromString(bytes);
  }
  Status finish() override {
    if (finished_) return {};
    {
      std::lock_guard lock(write_mu_);
      write_closed_ = true;
    }
    finished_ = true;
    GrpcStatus st = stream_->finish();
    if (st.code == 0) return {};
    return to_error(st, jobid_, address_);
  }
  bool send(const pb::StepClientMessage& msg) override {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return false;
    if (!stream_->write(msg.SerializeAsString())) write_closed_ = true;
    return !write_closed_;
  }
  void close_writes() override {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return;
    write_closed_ = true;
    (void)stream_->writes_done();
  }
  void cancel() override { stream_->cancel(); }

 private:
  uint64_t jobid_;
  std::string address_;
  std::unique_ptr<GrpcStream> stream_;
  std::mutex write_mu_;
  bool write_closed_ = false;  // under write_mu_
  bool finished_ = false;
};

}  // namespace

// ---------------------------------------------------------------- StepClient

struct StepClient::Stub {
  std::shared_ptr<GrpcChannel> channel;
};

StepClient::StepClient(std::string address, uint64_t jobid) : address_(std::move(address)), jobid_(jobid) {
  const char* reuse = std::getenv("CORRAL_STEP_REUSE");
  if (auto path = net::own_protocol_socket(address_, "CORRAL_STEP_TRANSPORT"))
    sockets_ = std::make_shared<StepSocketPool>(std::move(*path), reuse == nullptr || std::string_view(reuse) != "0");
}

StepClient::~StepClient() = default;

StepClient::Stub* StepClient::stub() {
  std::lock_guard lock(stub_mu_);  // callers share one client from many threads (the benchmark)
  if (stub_ || !setup_) return stub_.get();
  // Each StepClient gets its own connection: concurrent clients in one process (the
  // benchmark) are meant to measure independent callers. Without a channel every call
  // returns why (setup_).
  auto channel =
      open_grpc_channel(address_, true, [this](const std::string& why) { return unreachable(jobid_, address_, why); });
  if (!channel) {
    setup_ = channel.error();
    return nullptr;
  }
  stub_ = std::make_unique<Stub>();
  stub_->channel = std::move(*channel);
  return stub_.get();
}

Result<std::unique_ptr<StepStream::Impl>> StepClient::open_stream() {
  if (sockets_) {
    auto impl = open_step_socket(sockets_, jobid_, net::kMaxClientReply);
    if (!impl) return Error{impl.error().code, unreachable(jobid_, address_, impl.message())};
    return std::move(*impl);
  }
  Stub* grpc_stub = stub();
  if (grpc_stub == nullptr) return setup_.error();
  auto stream = grpc_stub->channel->bidi_stream("/corral.v1.StepService/RunStep");
  if (!stream) return stream.error();
  return std::unique_ptr<StepStream::Impl>(std::make_unique<GrpcStepStream>(jobid_, address_, std::move(*stream)));
}

Result<std::unique_ptr<StepStream>> StepClient::run(const pb::StepSpec& spec) {
  auto impl = open_stream();
  if (!impl) return impl.error();
  auto stream = std::make_unique<StepStream>(std::move(*impl));
  if (!stream->send_create(spec)) {
    // The stream broke at once: what the step manager said before it closed is the reason
    // (usually "connection refused" over gRPC).
    for (pb::StepServerMessage ignored; stream->read(ignored);) {}
    if (Status st = stream->finish(); !st.ok()) return st.error();
    return Error{Errc::unavailable, unreachable(jobid_, address_, "the step manager closed the connection")};
  }
  return stream;
}

Result<pb::ListStepsReply> StepClient::list_steps(uint64_t jobid, double timeout_seconds) {
  Stub* grpc_stub = stub();
  if (grpc_stub == nullptr) return setup_.error();
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  std::string bytes;
  auto st =
      grpc_stub->channel->unary("/corral.v1.StepService/ListSteps", req.SerializeAsString(), timeout_seconds, &bytes);
  if (!st) return st.error();
  if (st->code != 0) return to_error(*st, jobid_, address_);
  pb::ListStepsReply reply;
  if (!reply.ParseFromString(bytes))
    return Error{Errc::internal, fmt::format("the step manager of job {} sent a malformed reply", jobid_)};
  return reply;
}

}  // namespace corral::cli
