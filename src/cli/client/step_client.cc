#include "cli/client/step_client.h"

#include <chrono>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "cli/client/client.h"
#include "common.pb.h"
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

struct StepStream::Impl {
  uint64_t jobid = 0;
  std::string address;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::StepClientMessage, pb::StepServerMessage>> rw;
  std::mutex write_mu;
  bool write_closed = false;  // under write_mu
  bool finished = false;
};

StepStream::StepStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StepStream::~StepStream() {
  if (impl_ && impl_->rw && !impl_->finished) {
    impl_->ctx.TryCancel();
    (void)impl_->rw->Finish();
  }
}

bool StepStream::read(pb::StepServerMessage& msg) { return impl_->rw->Read(&msg); }

Status StepStream::finish() {
  if (impl_->finished) return {};
  {
    std::lock_guard lock(impl_->write_mu);
    impl_->write_closed = true;
  }
  impl_->finished = true;
  grpc::Status st = impl_->rw->Finish();
  if (st.ok()) return {};
  return to_error(st, impl_->jobid, impl_->address);
}

bool StepStream::send(const pb::StepClientMessage& msg) {
  std::lock_guard lock(impl_->write_mu);
  if (impl_->write_closed) return false;
  if (!impl_->rw->Write(msg)) impl_->write_closed = true;
  return !impl_->write_closed;
}

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

void StepStream::close_writes() {
  std::lock_guard lock(impl_->write_mu);
  if (impl_->write_closed) return;
  impl_->write_closed = true;
  (void)impl_->rw->WritesDone();
}

void StepStream::cancel() { impl_->ctx.TryCancel(); }

// ---------------------------------------------------------------- StepClient

struct StepClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::StepService::Stub> stub;
};

StepClient::StepClient(std::string address, uint64_t jobid)
    : address_(std::move(address)), jobid_(jobid), stub_(std::make_unique<Stub>()) {
  // Each StepClient gets its own connection: concurrent clients in one process (the
  // benchmark) are meant to measure independent callers. Without a channel every call
  // returns why (setup_).
  auto channel =
      client_channel(address_, true, [this](const std::string& why) { return unreachable(jobid_, address_, why); });
  if (!channel) {
    setup_ = channel.error();
    return;
  }
  stub_->channel = std::move(*channel);
  stub_->stub = pb::StepService::NewStub(stub_->channel);
}

StepClient::~StepClient() = default;

Result<std::unique_ptr<StepStream>> StepClient::run(const pb::StepSpec& spec) {
  auto impl = std::make_unique<StepStream::Impl>();
  impl->jobid = jobid_;
  impl->address = address_;
  if (!setup_) return setup_.error();
  if (auto st = authenticate(impl->ctx, address_); !st) return st.error();
  impl->rw = stub_->stub->RunStep(&impl->ctx);
  auto stream = std::make_unique<StepStream>(std::move(impl));
  pb::StepClientMessage create;
  *create.mutable_create() = spec;
  if (!stream->send(create)) {
    // The stream broke at once: Finish has the reason (usually "connection refused").
    Status st = stream->finish();
    if (!st.ok()) return st.error();
    return Error{Errc::unavailable, unreachable(jobid_, address_, "the step manager closed the stream")};
  }
  return stream;
}

Result<pb::ListStepsReply> StepClient::list_steps(uint64_t jobid, double timeout_seconds) {
  if (!setup_) return setup_.error();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000)));
  if (auto st = authenticate(ctx, address_); !st) return st.error();
  pb::ListStepsRequest req;
  req.set_jobid(jobid);
  pb::ListStepsReply reply;
  grpc::Status st = stub_->stub->ListSteps(&ctx, req, &reply);
  if (!st.ok()) return to_error(st, jobid_, address_);
  return reply;
}

}  // namespace corral::cli
