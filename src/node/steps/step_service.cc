#include "node/steps/step_service.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include <spdlog/spdlog.h>

#include "common.pb.h"
#include "net/grpc_credential.h"
#include "net/grpc_status.h"
#include "net/peer_listener.h"
#include "node/pmi/job_fence.h"
#include "node/steps/step_launch_rpc.h"
#include "node/steps/step_manager.h"
#include "steps.grpc.pb.h"
#include "util/event_loop.h"

namespace corral::node {

namespace {

// How long a unary call waits for the event loop before giving up (agent stopping).
constexpr auto kLoopWait = std::chrono::seconds(10);

const grpc::Status kUnknownPeer{grpc::StatusCode::UNAUTHENTICATED,
                                "cannot identify the caller: connect over the agent's Unix socket, or over "
                                "TCP with a MUNGE credential"};

bool output_only(const v1::StepServerMessage& m) { return !m.has_created() && !m.has_exit() && m.waiting().empty(); }

// Moves b's outputs to the end of a's, without copying their data.
void append_outputs(v1::StepServerMessage& a, v1::StepServerMessage& b) {
  auto* from = b.mutable_output();
  const int n = from->size();
  std::vector<v1::TaskOutput*> items(static_cast<size_t>(n));
  from->ExtractSubrange(0, n, items.data());
  for (auto* item : items) a.mutable_output()->AddAllocated(item);
}

using RunStepReactor = grpc::ServerBidiReactor<v1::StepClientMessage, v1::StepServerMessage>;

// One RunStep call. The loop thread queues messages through the shared Out; gRPC
// threads run the reactions. At most one write is in flight; output produced meanwhile
// is merged into the queued message, so a fast step costs few writes.
class RunStepCall final : public RunStepReactor {
 public:
  struct Out {
    std::mutex mu;
    RunStepCall* call = nullptr;  // null once gRPC is done with the call
    bool writing = false;
    bool closed = false;  // the exit is queued, or the call fails: nothing more
    bool finish_issued = false;
    std::optional<grpc::Status> fail;  // finish with this once the queue is written
    std::deque<v1::StepServerMessage> queue;
    size_t queued_bytes = 0;  // of `queue`: what the client has not read yet
    v1::StepServerMessage current;
    grpc::CallbackServerContext* ctx = nullptr;  // valid while `call` is
    size_t max_unread = kMaxUnreadOutput;

    void send(v1::StepServerMessage&& msg) {
      std::unique_lock lk(mu);
      if (call == nullptr || closed) return;
      if (msg.has_exit()) closed = true;
      if (writing) {
        queued_bytes += msg.ByteSizeLong();
        if (queued_bytes > max_unread) {  // the client does not read: it is taken for gone
          spdlog::warn("step service: a client has not read {} MiB of its step's output: taken for gone",
                       queued_bytes >> 20);
          queue.clear();
          closed = true;
          grpc::CallbackServerContext* c = ctx;
          lk.unlock();
          c->TryCancel();  // OnCancel ends the step
          return;
        }
        if (!queue.empty() && output_only(queue.back()) && output_only(msg))
          append_outputs(queue.back(), msg);
        else
          queue.push_back(std::move(msg));
        return;
      }
      start(lk, std::move(msg));
    }

    void fail_with(grpc::Status st) {
      std::unique_lock lk(mu);
      if (call == nullptr || closed) return;
      closed = true;
      fail = std::move(st);
      if (!writing) finish(lk);
    }

    // Called with `lk` held; releases it.
    void start(std::unique_lock<std::mutex>& lk, v1::StepServerMessage&& msg) {
      writing = true;
      current = std::move(msg);
      RunStepCall* c = call;
      if (current.has_exit()) {
        finish_issued = true;
        lk.unlock();
        c->StartWriteAndFinish(&current, grpc::WriteOptions(), grpc::Status::OK);
      } else {
        lk.unlock();
        c->StartWrite(&current);
      }
    }

    void finish(std::unique_lock<std::mutex>& lk) {
      if (finish_issued) return;
      finish_issued = true;
      grpc::Status st = fail ? *fail : grpc::Status::OK;
      RunStepCall* c = call;
      lk.unlock();
      c->Finish(st);
    }
  };

  RunStepCall(grpc::CallbackServerContext* ctx, EventLoop& loop, StepManager& steps, StepManager::ClientId id,
              std::optional<uint32_t> uid, size_t max_unread)
      : loop_(loop), steps_(steps), id_(id), uid_(uid), out_(std::make_shared<Out>()) {
    out_->call = this;
    out_->ctx = ctx;
    out_->max_unread = max_unread;
    if (!uid_) {
      out_->fail_with(kUnknownPeer);
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side (or the call ended): nothing more to read
      if (first_) out_->fail_with({grpc::StatusCode::INVALID_ARGUMENT, "the client sent no step request"});
      return;
    }
    if (first_) {
      first_ = false;
      if (!in_.has_create()) {
        out_->fail_with({grpc::StatusCode::INVALID_ARGUMENT, "the first RunStep message must carry `create`"});
        return;
      }
      StepClientSink sink;
      sink.send = [out = out_](v1::StepServerMessage&& m) { out->send(std::move(m)); };
      sink.fail = [out = out_](const Error& e) { out->fail_with(net::to_grpc(e)); };
      loop_.post([&steps = steps_, id = id_, uid = *uid_, spec = std::move(*in_.mutable_create()),
                  sink = std::move(sink)]() mutable { steps.open(id, uid, std::move(spec), std::move(sink)); });
    } else {
      loop_.post(
          [&steps = steps_, id = id_, msg = std::move(in_)]() mutable { steps.client_message(id, std::move(msg)); });
    }
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lk(out_->mu);
    out_->writing = false;
    if (!ok) {  // the client is gone
      out_->queue.clear();
      out_->closed = true;
      if (!out_->fail) out_->fail = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      out_->finish(lk);
      return;
    }
    if (!out_->queue.empty()) {
      v1::StepServerMessage next = std::move(out_->queue.front());
      out_->queue.pop_front();
      const size_t size = next.ByteSizeLong();
      out_->queued_bytes = out_->queued_bytes > size ? out_->queued_bytes - size : 0;
      out_->start(lk, std::move(next));
      return;
    }
    if (out_->fail) out_->finish(lk);
  }

  void OnCancel() override {
    if (uid_) loop_.post([&steps = steps_, id = id_] { steps.client_gone(id); });
    std::unique_lock lk(out_->mu);
    out_->closed = true;
    if (!out_->fail) out_->fail = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    if (!out_->writing) out_->finish(lk);
  }

  void OnDone() override {
    {
      std::lock_guard lk(out_->mu);
      out_->call = nullptr;
      out_->queue.clear();
    }
    delete this;  // gRPC's reactor contract: the reactor owns itself until OnDone
  }

 private:
  EventLoop& loop_;
  StepManager& steps_;
  StepManager::ClientId id_;
  std::optional<uint32_t> uid_;
  std::shared_ptr<Out> out_;
  v1::StepClientMessage in_;
  bool first_ = true;
};

}  // namespace

class StepService::Impl final : public v1::StepService::WithCallbackMethod_RunStep<v1::StepService::Service> {
 public:
  Impl(EventLoop& loop, StepManager& steps, StepNode& node, JobFenceTable& fences, const net::PeerListener* peers,
       std::shared_ptr<net::Credentials> creds)
      : loop_(loop), steps_(steps), node_(node), fences_(fences), peers_(peers), creds_(std::move(creds)) {}

  std::atomic<size_t> max_unread{kMaxUnreadOutput};  // for calls opened from now on

  RunStepReactor* RunStep(grpc::CallbackServerContext* ctx) override {
    return new RunStepCall(ctx, loop_, steps_, next_client_.fetch_add(1), caller(ctx), max_unread.load());
  }

  grpc::Status ListSteps(grpc::ServerContext* ctx, const v1::ListStepsRequest* req,
                         v1::ListStepsReply* reply) override {
    auto uid = caller(ctx);
    if (!uid) return kUnknownPeer;
    auto promise = std::make_shared<std::promise<Result<v1::ListStepsReply>>>();
    auto result = promise->get_future();
    loop_.post(
        [promise, &steps = steps_, uid = *uid, jobid = req->jobid()] { promise->set_value(steps.list(uid, jobid)); });
    if (result.wait_for(kLoopWait) != std::future_status::ready)
      return {grpc::StatusCode::UNAVAILABLE, "the node agent did not answer (it may be stopping)"};
    auto r = result.get();
    if (!r) return net::to_grpc(r.error());
    reply->Swap(&*r);
    return grpc::Status::OK;
  }

  grpc::Status LaunchTasks(grpc::ServerContext* ctx,
                           grpc::ServerReaderWriter<v1::LaunchUp, v1::LaunchDown>* stream) override {
    return serve_launch_tasks(loop_, node_, ctx, stream);
  }

  grpc::Status JobFence(grpc::ServerContext* ctx, const v1::JobFenceRequest* req, v1::JobFenceReply* reply) override {
    // Node agents only: they run as root, or as this agent's user in tests.
    auto uid = caller(ctx);
    if (!uid) return kUnknownPeer;
    if (*uid != 0 && *uid != ::getuid()) return {grpc::StatusCode::PERMISSION_DENIED, "JobFence is for node agents"};
    auto kvs = fences_.contribute(*req, [ctx] { return ctx->IsCancelled(); });
    if (!kvs) return net::to_grpc(kvs.error());
    reply->mutable_kvs()->insert(kvs->begin(), kvs->end());
    return grpc::Status::OK;
  }

 private:
  // The Unix socket's SO_PEERCRED, or over TCP the request's credential (as corrald
  // does); nothing else identifies a caller. Refusals over TCP are logged with the peer.
  std::optional<uint32_t> caller(grpc::ServerContextBase* ctx) const {
    const std::string peer = ctx->peer();
    if (peers_ != nullptr)
      if (auto cred = peers_->lookup(peer)) return cred->uid;
    if ((peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) || !creds_) return std::nullopt;
    auto id = net::caller_of(*ctx, *creds_);
    if (!id) {
      spdlog::warn("step service: refused a request from {}: {}", peer, id.message());
      return std::nullopt;
    }
    return id->uid;
  }

  EventLoop& loop_;
  StepManager& steps_;
  StepNode& node_;
  JobFenceTable& fences_;
  const net::PeerListener* peers_;
  std::shared_ptr<net::Credentials> creds_;
  std::atomic<StepManager::ClientId> next_client_{1};
};

StepService::StepService(EventLoop& loop, StepManager& steps, StepNode& node, JobFenceTable& fences,
                         const net::PeerListener* peers, std::shared_ptr<net::Credentials> creds)
    : impl_(std::make_unique<Impl>(loop, steps, node, fences, peers, std::move(creds))) {}

StepService::~StepService() = default;

void StepService::set_max_unread_output(size_t bytes) { impl_->max_unread = bytes; }

grpc::Service* StepService::service() { return impl_.get(); }

}  // namespace corral::node
