#include "node/controller_link.h"

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent.grpc.pb.h"
#include "job/hmac_key.h"
#include "net/grpc_credential.h"
#include "net/message_limits.h"
#include "net/resolve.h"
#include "net/tls.h"
#include "node/agent.h"
#include "util/event_loop.h"

namespace corral::node {

namespace v1 = ::corral::v1;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kBackoffFirst = std::chrono::milliseconds(100);
constexpr auto kBackoffMax = std::chrono::milliseconds(2000);
constexpr double kDefaultHeartbeat = 2.0;
}  // namespace

struct ControllerLink::Impl {
  using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>;

  std::string uri;
  EventLoop& loop;
  Agent& agent;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Agents::Stub> stub;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool stream_dead = false;
  uint64_t session = 0;
  std::deque<v1::AgentMessage> queue;      // of `session`
  grpc::ClientContext* context = nullptr;  // the live stream's, for cancellation
  std::atomic<double> heartbeat{kDefaultHeartbeat};
  std::thread thread;

  enum class LinkState { starting, connected, down };
  LinkState state = LinkState::starting;
  std::string last_error;
  std::string last_refusal;  // of a controller that did not prove itself

  Impl(std::string u, EventLoop& l, Agent& a) : uri(std::move(u)), loop(l), agent(a) {}

  // A fresh channel per attempt: a channel that failed keeps its own reconnect and
  // re-resolution timers, which made reconnects seconds slower than our backoff.
  void new_channel() {
    // gRPC's own reconnect backoff (1 s growing to 120 s) would keep failing our calls
    // long after the controller is back; keep it within ours.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // no state shared with the failed channel
    // A controller restart must be noticed even when nothing is being written.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetMaxReceiveMessageSize(static_cast<int>(net::kMaxAgentDownMessage));
    args.SetMaxSendMessageSize(static_cast<int>(net::kMaxAgentUpMessage));
    auto creds = net::channel_credentials(agent.config().tls_ca, uri);  // checked at start-up
    channel = grpc::CreateCustomChannel(uri, creds ? *creds : grpc::InsecureChannelCredentials(), args);
    stub = v1::Agents::NewStub(channel);
  }

  template <class T>
  std::optional<T> call_on_loop(std::function<T()> fn) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    loop.post([promise, fn = std::move(fn)] { promise->set_value(fn()); });
    while (future.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      std::lock_guard lock(mu);
      if (stopping) return std::nullopt;  // the loop may already be gone
    }
    return future.get();
  }

  // Over TCP the answer must prove it comes from the real controller before the agent
  // acts on it: a credential (controller payload) from root, made on a host the
  // controller's address names, for this agent's uid only. (On the Unix socket only root
  // could have made it.)
  // Over TCP: the session key the controller's credential carries (over a Unix socket it
  // comes in the register ack instead: empty here).
  Result<std::string> check_controller(const grpc::ClientContext& ctx) const {
    if (!net::over_network(uri)) return std::string();
    const auto& md = ctx.GetServerInitialMetadata();
    auto it = md.find(grpc::string_ref(net::kCredentialMetadataKey.data(), net::kCredentialMetadataKey.size()));
    if (it == md.end())
      return denied(fmt::format("the controller at {} did not prove itself (no {} credential)", uri,
                                agent.config().credentials->name()));
    std::string session_key;
    auto id = agent.config().credentials->decode(std::string_view(it->second.data(), it->second.size()),
                                                 net::kControllerPayload, &session_key);
    if (!id) return denied("the controller at " + uri + " did not prove itself: " + id.message());
    if (id->uid != 0 && id->uid != ::getuid())
      return denied(fmt::format("the controller at {} runs as uid {}, not root: refused", uri, id->uid));
    const std::string host = controller_host();
    const auto addrs = net::resolve_ipv4(host);
    if (std::find(addrs.begin(), addrs.end(), id->origin) == addrs.end())
      return denied(fmt::format("the controller's credential comes from {}, not from {}: refused",
                                id->origin.empty() ? "an unknown host" : id->origin, host));
    if (session_key.size() != job::kKeyBytes)
      return denied("the controller at " + uri + " sent no session key (a corrald older than this agent?)");
    return session_key;
  }

  // proven: *session_key is the connection's (empty over a Unix socket, where it comes in
  // the register ack); refused: said in the log; ended: the controller ended the call
  // first, and Finish says why.
  enum class Proof { proven, refused, ended };
  Proof prove_controller(Stream& stream, const grpc::ClientContext& ctx, std::string* session_key) {
    if (!net::over_network(uri)) return Proof::proven;
    stream.WaitForInitialMetadata();
    if (ctx.GetServerInitialMetadata().empty()) return Proof::ended;
    auto proof = check_controller(ctx);
    if (proof) {
      *session_key = std::move(*proof);
      return Proof::proven;
    }
    // Whoever answers there is not obeyed; said once per reason, not once per retry.
    if (proof.message() != last_refusal) spdlog::warn("{}", proof.message());
    last_refusal = proof.message();
    note_down(proof.message());
    return Proof::refused;
  }

  // "host:port", "ipv4:host:port", "dns:///host:port" -> host.
  std::string controller_host() const {
    std::string target = uri;
    for (const char* scheme : {"dns:///", "ipv4:", "ipv6:"})
      if (target.rfind(scheme, 0) == 0) target = target.substr(std::string_view(scheme).size());
    const size_t colon = target.rfind(':');
    std::string host = colon == std::string::npos ? target : target.substr(0, colon);
    if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return host;
  }

  void note_down(const std::string& why) {
    if (state == LinkState::connected)
      spdlog::warn("lost the controller at {}: {} (reconnecting)", uri, why);
    else if (state == LinkState::starting)
      spdlog::warn("cannot reach the controller at {}: {} (retrying)", uri, why);
    else if (why != last_error)
      spdlog::debug("controller at {} still unreachable: {}", uri, why);
    state = LinkState::down;
    last_error = why;
  }

  void run() {
    auto backoff = kBackoffFirst;
    for (;;) {
      {
        std::lock_guard lock(mu);
        if (stopping) return;
      }
      if (run_session()) backoff = kBackoffFirst;
      std::unique_lock lock(mu);
      if (cv.wait_for(lock, backoff, [this] { return stopping; })) return;
      backoff = std::min(backoff * 2, kBackoffMax);
    }
  }

  // One stream from connect to failure; true if it got as far as register_ack.
  bool run_session() {
    grpc::ClientContext ctx;
    uint64_t sid;
    {
      std::lock_guard lock(mu);
      if (stopping) return false;
      sid = ++session;
      queue.clear();
      stream_dead = false;
      context = &ctx;
    }
    new_channel();
    // Over TCP the controller knows this agent by its credential (MUNGE's, or the cluster key's).
    if (auto st = net::add_credential(ctx, uri, *agent.config().credentials); !st) {
      note_down(st.message());
      return false;
    }
    std::unique_ptr<Stream> stream = stub->Stream(&ctx);
    // Over TCP the controller proves itself first: an impostor learns nothing of this
    // agent's nodes, and is refused whether or not it would acknowledge them.
    std::string session_key;
    const Proof proof = prove_controller(*stream, ctx, &session_key);
    std::optional<v1::AgentMessage> reg;
    if (proof == Proof::proven) reg = call_on_loop<v1::AgentMessage>([this, sid] { return agent.begin_register(sid); });
    bool acked = false;
    bool answered = proof == Proof::refused;  // false: the controller ended the call, and Finish says why
    v1::ControllerMessage first;
    if (reg && stream->Write(*reg) && (answered = stream->Read(&first))) {
      if (first.register_ack()) {
        acked = true;
        if (!session_key.empty()) first.set_session_key(session_key);
      } else {
        note_down("the controller did not acknowledge the registration");
      }
    }
    std::thread reader;
    if (acked) {
      if (first.heartbeat_interval() > 0) heartbeat = first.heartbeat_interval();
      if (state != LinkState::connected)
        spdlog::info("registered with the controller at {} as {}", uri, agent.config().agent_id);
      state = LinkState::connected;
      loop.post([this, sid, first] { agent.on_registered(sid, first); });
      reader = std::thread([this, s = stream.get()] { read_loop(s); });
      write_loop(stream.get());
    }
    {
      std::lock_guard lock(mu);
      context = nullptr;
      stream_dead = true;
    }
    // Not when the controller ended the call: cancelling would hide its reason.
    if (answered || (proof == Proof::proven && !reg)) ctx.TryCancel();
    if (reader.joinable()) reader.join();
    grpc::Status status = stream->Finish();
    loop.post([this, sid] { agent.on_disconnected(sid); });
    bool stopped;
    {
      std::lock_guard lock(mu);
      stopped = stopping;
    }
    if (!stopped) note_down(status.ok() ? "the controller closed the stream" : status.error_message());
    return acked;
  }

  void read_loop(Stream* stream) {
    v1::ControllerMessage msg;
    while (stream->Read(&msg)) {
      if (msg.heartbeat_interval() > 0) heartbeat = msg.heartbeat_interval();
      auto shared = std::make_shared<v1::ControllerMessage>(std::move(msg));
      loop.post([this, shared] { agent.handle(*shared); });
      msg = v1::ControllerMessage();
    }
    std::lock_guard lock(mu);
    stream_dead = true;
    cv.notify_all();
  }

  void write_loop(Stream* stream) {
    auto last_write = Clock::now();
    for (;;) {
      v1::AgentMessage msg;
      {
        std::unique_lock lock(mu);
        auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(heartbeat.load()));
        cv.wait_until(lock, last_write + interval, [this] { return stopping || stream_dead || !queue.empty(); });
        if (stopping || stream_dead) return;
        if (!queue.empty()) {
          msg = std::move(queue.front());
          queue.pop_front();
        } else if (Clock::now() >= last_write + interval) {
          msg.set_heartbeat(true);
        } else {
          continue;
        }
      }
      if (!stream->Write(msg)) return;
      last_write = Clock::now();
    }
  }

  void send(uint64_t sid, v1::AgentMessage msg) {
    std::lock_guard lock(mu);
    if (sid != session || stream_dead || stopping) return;
    queue.push_back(std::move(msg));
    cv.notify_all();
  }

  void stop() {
    {
      std::lock_guard lock(mu);
      stopping = true;
      if (context != nullptr) context->TryCancel();
      cv.notify_all();
    }
    if (thread.joinable()) thread.join();
  }
};

ControllerLink::ControllerLink(std::string uri, EventLoop& loop, Agent& agent)
    : impl_(std::make_unique<Impl>(std::move(uri), loop, agent)) {}

ControllerLink::~ControllerLink() { stop(); }

void ControllerLink::start() {
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

void ControllerLink::stop() { impl_->stop(); }

void ControllerLink::send(uint64_t session, v1::AgentMessage msg) { impl_->send(session, std::move(msg)); }

}  // namespace corral::node
