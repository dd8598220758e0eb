#include "node/steps/step_child_link.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "net/tls.h"
#include "steps.grpc.pb.h"
#include "util/event_loop.h"

namespace corral::node {

namespace {

std::shared_ptr<grpc::Channel> make_channel(const std::string& uri, const std::string& tls_ca) {
  grpc::ChannelArguments args;
  // A child agent that dies must not leave the step waiting, yet a step may stay silent
  // for hours: keepalive at the server's default minimum ping interval (5 min), so
  // servers never answer our pings with "too many pings".
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 300000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // The agent checked its --tls-ca at start-up; a file gone since falls back to plaintext,
  // which a TLS peer refuses.
  auto creds = net::channel_credentials(tls_ca, uri);
  return grpc::CreateCustomChannel(uri, creds ? *creds : grpc::InsecureChannelCredentials(), args);
}

std::string describe(const grpc::Status& st) {
  static const char* const kCodes[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  auto code = static_cast<size_t>(st.error_code());
  std::string name = code < std::size(kCodes) ? kCodes[code] : std::to_string(code);
  return st.error_message().empty() ? name : st.error_message() + " (" + name + ")";
}

}  // namespace

struct StepChildLink::Impl {
  using Stream = grpc::ClientReaderWriter<v1::LaunchDown, v1::LaunchUp>;

  EventLoop& loop;
  std::string uri;
  OnUp on_up;
  OnClosed on_closed;
  std::shared_ptr<int> alive = std::make_shared<int>(0);  // posted callbacks check it

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::StepService::Stub> stub;
  grpc::ClientContext ctx;  // outlives the stream
  std::unique_ptr<Stream> stream;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<v1::LaunchDown> queue;
  bool stream_ready = false;
  bool half_close = false;
  bool ended = false;  // reads are over (or the link is being destroyed)
  bool writer_exited = false;
  std::thread writer, reader;

  Impl(EventLoop& l, std::string u, OnUp up, OnClosed closed)
      : loop(l), uri(std::move(u)), on_up(std::move(up)), on_closed(std::move(closed)) {}

  void write_loop(v1::LaunchDown first) {
    stream = stub->LaunchTasks(&ctx);
    {
      std::lock_guard lock(mu);
      stream_ready = true;
    }
    cv.notify_all();
    bool ok = stream->Write(first);
    while (ok) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return ended || half_close || !queue.empty(); });
      if (ended) break;
      if (!queue.empty()) {
        v1::LaunchDown msg = std::move(queue.front());
        queue.pop_front();
        lock.unlock();
        ok = stream->Write(msg);
        continue;
      }
      lock.unlock();
      stream->WritesDone();
      break;
    }
    std::lock_guard lock(mu);
    writer_exited = true;
    cv.notify_all();
  }

  void read_loop() {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stream_ready; });
    }
    std::weak_ptr<int> token = alive;
    v1::LaunchUp up;
    while (stream->Read(&up)) {
      loop.post([this, token, msg = std::move(up)]() mutable {
        if (token.lock()) on_up(std::move(msg));
      });
      up = v1::LaunchUp();
    }
    {
      std::unique_lock lock(mu);
      ended = true;
      cv.notify_all();
      cv.wait(lock, [&] { return writer_exited; });
    }
    grpc::Status st = stream->Finish();
    std::string error = st.ok() ? "" : "the launch stream to agent " + uri + " failed: " + describe(st);
    loop.post([this, token, error] {
      if (token.lock()) on_closed(error);
    });
  }
};

StepChildLink::StepChildLink(EventLoop& loop, std::string uri, const std::string& tls_ca, v1::LaunchTasksRequest launch,
                             OnUp up, OnClosed closed)
    : impl_(std::make_unique<Impl>(loop, std::move(uri), std::move(up), std::move(closed))) {
  impl_->channel = make_channel(impl_->uri, tls_ca);
  impl_->stub = v1::StepService::NewStub(impl_->channel);
  v1::LaunchDown first;
  *first.mutable_launch() = std::move(launch);
  Impl* impl = impl_.get();
  impl->writer = std::thread([impl, first = std::move(first)]() mutable { impl->write_loop(std::move(first)); });
  impl->reader = std::thread([impl] { impl->read_loop(); });
}

StepChildLink::~StepChildLink() {
  impl_->alive.reset();
  impl_->ctx.TryCancel();
  {
    std::lock_guard lock(impl_->mu);
    impl_->ended = true;
  }
  impl_->cv.notify_all();
  impl_->writer.join();
  impl_->reader.join();
}

void StepChildLink::send(v1::LaunchDown msg) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->ended || impl_->half_close) return;
    impl_->queue.push_back(std::move(msg));
  }
  impl_->cv.notify_all();
}

void StepChildLink::close_writes() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->half_close = true;
  }
  impl_->cv.notify_all();
}

void StepChildLink::cancel() { impl_->ctx.TryCancel(); }

const std::string& StepChildLink::uri() const { return impl_->uri; }

}  // namespace corral::node
