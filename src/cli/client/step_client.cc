#include "cli/client/step_client.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cli/client/client.h"
#include "cli/client/step_socket_client.h"
#include "common.pb.h"
#include "net/message_limits.h"
#include "net/unix_connect.h"
#include "steps.grpc.pb.h"

namespace corral::cli {

namespace {

std::string unreachable(uint64_t jobid, const std::string& address, const std::string& why) {
  return fmt::format(
      "cannot reach the step manager of job {} at {}: {} (has the job ended? see 'corral "
      "show {}')",
      jobid, address, why, jobid);
}

Error to_error(const grpc::Status& st, uint64_t jobid, const std::string& address) {
  return step_rpc_error(static_cast<int>(st.error_code()), st.error_message(), jobid, address);
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
  GrpcStepStream(uint64_t jobid, std::string address) : jobid_(jobid), address_(std::move(address)) {}
  ~GrpcStepStream() override {
    if (rw_ && !finished_) {
      ctx_.TryCancel();
      (void)rw_->Finish();
    }
  }
  Status open(pb::StepService::Stub& stub) {
    if (auto st = authenticate(ctx_, address_); !st) return st;
    rw_ = stub.RunStep(&ctx_);
    return {};
  }
  bool read(pb::StepServerMessage& msg) override { return rw_->Read(&msg); }
  Status finish() override {
    if (finished_) return {};
    {
      std::lock_guard lock(write_mu_);
      write_closed_ = true;
    }
    finished_ = true;
    grpc::Status st = rw_->Finish();
    if (st.ok()) return {};
    return to_error(st, jobid_, address_);
  }
  bool send(const pb::StepClientMessage& msg) override {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return false;
    if (!rw_->Write(msg)) write_closed_ = true;
    return !write_closed_;
  }
  void close_writes() override {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return;
    write_closed_ = true;
    (void)rw_->WritesDone();
  }
  void cancel() override { ctx_.TryCancel(); }

 private:
  uint64_t jobid_;
  std::string address_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::StepClientMessage, pb::StepServerMessage>> rw_;
  std::mutex write_mu_;
  bool write_closed_ = false;  // under write_mu_
  bool finished_ = false;
};

}  // namespace

// ---------------------------------------------------------------- StepClient

struct StepClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::StepService::Stub> stub;
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
      client_channel(address_, true, [this](const std::string& why) { return unreachable(jobid_, address_, why); });
  if (!channel) {
    setup_ = channel.error();
    return nullptr;
  }
  stub_ = std::make_unique<Stub>();
  stub_->channel = std::move(*channel);
  stub_->stub = pb::StepService::NewStub(stub_->channel);
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
  auto impl = std::make_unique<GrpcStepStream>(jobid_, address_);
  if (auto st = impl->open(*grpc_stub->stub); !st) return st.error();
  return std::unique_ptr<StepStream::Impl>(std::move(impl));
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
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000)));
  if (auto st = authenticate(ctx, address_); !st) return st.error();
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  pb::ListStepsReply reply;
  grpc::Status st = grpc_stub->stub->ListSteps(&ctx, req, &reply);
  if (!st.ok()) return to_error(st, jobid_, address_);
  return reply;
}

}  // namespace corral::cli
