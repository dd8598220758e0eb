#include "node/pmi/job_fence.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "net/grpc_credential.h"
#include "net/tls.h"
#include "steps.grpc.pb.h"
#include "util/event_loop.h"

namespace corral::node {

namespace {

// The agent checked its --tls-ca at start-up; a file that went away since falls back to
// plaintext, which a TLS step manager refuses with a message.
std::shared_ptr<grpc::ChannelCredentials> security(const std::string& tls_ca, const std::string& target) {
  auto creds = net::channel_credentials(tls_ca, target);
  return creds ? *creds : grpc::InsecureChannelCredentials();
}

struct Barrier {
  uint32_t nodes = 0;
  std::map<std::string, bool> seen;  // contributing node names
  PmiKvs kvs;
  bool complete = false;
  std::string error;
  size_t waiting = 0;
};

using BarrierKey = std::pair<uint64_t, uint32_t>;  // jobid, seq

}  // namespace

struct JobFenceTable::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::map<BarrierKey, Barrier> barriers;

  // Called with mu held; the caller that completes a barrier wakes the others.
  Status add(Barrier& b, const v1::JobFenceRequest& req) {
    if (req.nodes() == 0) return invalid("JobFence: the barrier names no nodes");
    if (b.nodes == 0) b.nodes = req.nodes();
    if (b.nodes != req.nodes())
      return invalid("JobFence: node " + req.node() + " expects " + std::to_string(req.nodes()) + " nodes at barrier " +
                     std::to_string(req.seq()) + ", others " + std::to_string(b.nodes));
    if (!b.seen.emplace(req.node(), true).second)
      return invalid("JobFence: node " + req.node() + " entered barrier " + std::to_string(req.seq()) + " twice");
    for (const auto& [k, v] : req.kvs()) b.kvs.insert_or_assign(k, v);
    if (b.seen.size() == b.nodes) {
      b.complete = true;
      cv.notify_all();
    }
    return {};
  }
};

JobFenceTable::JobFenceTable() : impl_(std::make_unique<Impl>()) {}
JobFenceTable::~JobFenceTable() = default;

Result<PmiKvs> JobFenceTable::contribute(const v1::JobFenceRequest& req, const std::function<bool()>& cancelled) {
  std::unique_lock lock(impl_->mu);
  BarrierKey key{req.jobid(), req.seq()};
  Barrier& b = impl_->barriers[key];
  if (auto st = impl_->add(b, req); !st) {
    if (b.seen.empty()) impl_->barriers.erase(key);
    return st.error();
  }
  ++b.waiting;
  while (!b.complete && b.error.empty()) {
    impl_->cv.wait_for(lock, std::chrono::milliseconds(250));
    if (!b.complete && b.error.empty() && cancelled()) {
      b.error = "node " + req.node() + " went away during barrier " + std::to_string(req.seq());
      impl_->cv.notify_all();
    }
  }
  Result<PmiKvs> out = b.error.empty() ? Result<PmiKvs>(b.kvs) : Result<PmiKvs>(Error{Errc::unavailable, b.error});
  if (--b.waiting == 0) impl_->barriers.erase(key);
  return out;
}

void JobFenceTable::drop_job(uint64_t jobid) {
  std::lock_guard lock(impl_->mu);
  for (auto it = impl_->barriers.lower_bound({jobid, 0}); it != impl_->barriers.end() && it->first.first == jobid; ++it)
    if (!it->second.complete) it->second.error = "job " + std::to_string(jobid) + " ended";
  impl_->cv.notify_all();
}

struct JobFenceExchange::Impl {
  EventLoop& loop;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::StepService::Stub> stub;
  uint64_t jobid;
  std::string node;
  uint32_t nodes;
  uint32_t seq = 0;
  std::string uri;
  std::shared_ptr<net::Credentials> creds;
  struct Call {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::thread thread;
  };
  std::vector<Call> calls;

  Impl(EventLoop& l, const std::string& target, uint64_t j, std::string n, uint32_t c,
       std::shared_ptr<net::Credentials> cr, const std::string& tls_ca)
      : loop(l),
        channel(grpc::CreateChannel(target, security(tls_ca, target))),
        stub(v1::StepService::NewStub(channel)),
        jobid(j),
        node(std::move(n)),
        nodes(c),
        uri(target),
        creds(std::move(cr)) {}
};

JobFenceExchange::JobFenceExchange(EventLoop& loop, std::string stepmgr_uri, uint64_t jobid, std::string node,
                                   uint32_t nodes, std::shared_ptr<net::Credentials> creds, const std::string& tls_ca)
    : impl_(std::make_unique<Impl>(loop, stepmgr_uri, jobid, std::move(node), nodes, std::move(creds), tls_ca)) {}

JobFenceExchange::~JobFenceExchange() {
  for (auto& c : impl_->calls) c.ctx->TryCancel();
  for (auto& c : impl_->calls) c.thread.join();
}

void JobFenceExchange::fence(PmiKvs local_puts, Done done) {
  v1::JobFenceRequest req;
  req.set_jobid(impl_->jobid);
  req.set_seq(impl_->seq++);
  req.set_node(impl_->node);
  req.set_nodes(impl_->nodes);
  for (auto& [k, v] : local_puts) (*req.mutable_kvs())[k] = std::move(v);
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_wait_for_ready(true);  // the step manager's agent may still be starting its server
  Status cred = impl_->creds                    ? net::add_credential(*ctx, impl_->uri, *impl_->creds)
                : net::over_network(impl_->uri) ? Status(Error{Errc::internal, "no credentials for a call over TCP"})
                                                : Status();
  if (!cred) {
    impl_->loop.post([done = std::move(done), e = cred.error()]() mutable {
      done(Error{Errc::unavailable, "the step manager's barrier: " + e.message});
    });
    return;
  }
  grpc::ClientContext* raw = ctx.get();
  EventLoop& loop = impl_->loop;
  v1::StepService::Stub* stub = impl_->stub.get();
  std::thread t([raw, stub, req = std::move(req), done = std::move(done), &loop]() mutable {
    v1::JobFenceReply reply;
    grpc::Status st = stub->JobFence(raw, req, &reply);
    Result<PmiKvs> out = Error{Errc::unavailable, ""};
    if (st.ok()) {
      PmiKvs kvs(reply.kvs().begin(), reply.kvs().end());
      out = std::move(kvs);
    } else {
      out = Error{Errc::unavailable, "the step manager's barrier failed: " + st.error_message()};
    }
    loop.post([done = std::move(done), out = std::move(out)]() mutable { done(std::move(out)); });
  });
  impl_->calls.push_back(Impl::Call{std::move(ctx), std::move(t)});
}

}  // namespace corral::node
