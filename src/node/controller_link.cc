#include "node/controller_link.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "net/unix_connect.h"
#include "node/agent.h"
#include "node/controller_stream.h"
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
  std::string uri;
  EventLoop& loop;
  Agent& agent;
  // corrald's Unix socket, for the stream in corral's own frames (net/agent_frames.h);
  // empty over TCP, with CORRAL_AGENT_TRANSPORT=grpc, or once the controller did not
  // answer that protocol.
  std::string socket_path;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool stream_dead = false;
  uint64_t session = 0;
  std::deque<v1::AgentMessage> queue;  // of `session`
  ControllerStream* current = nullptr;  // the live stream, for cancellation
  std::atomic<double> heartbeat{kDefaultHeartbeat};
  std::thread thread;

  enum class LinkState { starting, connected, down };
  LinkState state = LinkState::starting;
  std::string last_error;
  std::string last_refusal;  // of a controller that did not prove itself

  Impl(std::string u, EventLoop& l, Agent& a)
      : uri(std::move(u)),
        loop(l),
        agent(a),
        socket_path(net::own_protocol_socket(uri, "CORRAL_AGENT_TRANSPORT").value_or("")) {}

  Result<std::unique_ptr<ControllerStream>> open_stream() {
    if (!socket_path.empty()) return open_socket_stream(socket_path);
    return open_grpc_stream(uri, agent.config());
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

  // Over TCP the controller proves itself first: an impostor learns nothing of this
  // agent's nodes, and is refused whether or not it would acknowledge them.
  ControllerStream::Proof prove_controller(ControllerStream& stream, std::string* session_key) {
    std::string why;
    const auto proof = stream.prove(session_key, &why);
    if (proof != ControllerStream::Proof::refused) return proof;
    // Whoever answers there is not obeyed; said once per reason, not once per retry.
    if (why != last_refusal) spdlog::warn("{}", why);
    last_refusal = why;
    note_down(why);
    return proof;
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
    uint64_t sid;
    {
      std::lock_guard lock(mu);
      if (stopping) return false;
      sid = ++session;
      queue.clear();
      stream_dead = false;
    }
    auto opened = open_stream();
    if (!opened) {
      note_down(opened.message());
      return false;
    }
    std::unique_ptr<ControllerStream> stream = std::move(*opened);
    {
      std::lock_guard lock(mu);
      if (stopping) return false;
      current = stream.get();
    }
    using Proof = ControllerStream::Proof;
    std::string session_key;
    const Proof proof = prove_controller(*stream, &session_key);
    std::optional<v1::AgentMessage> reg;
    if (proof == Proof::proven) reg = call_on_loop<v1::AgentMessage>([this, sid] { return agent.begin_register(sid); });
    bool acked = false;
    bool answered = proof == Proof::refused;  // false: the controller ended the call, and finish() says why
    v1::ControllerMessage first;
    if (reg && stream->write(*reg) && (answered = stream->read(&first))) {
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
      current = nullptr;
      stream_dead = true;
    }
    // Not when the controller ended the call: cancelling would hide its reason.
    if (answered || (proof == Proof::proven && !reg)) stream->cancel();
    if (reader.joinable()) reader.join();
    const std::string why = stream->finish();
    loop.post([this, sid] { agent.on_disconnected(sid); });
    bool stopped;
    {
      std::lock_guard lock(mu);
      stopped = stopping;
    }
    if (!socket_path.empty() && reg && stream->unheard() && !stopped) {
      // A corrald before net/agent_frames.h hands the connection to gRPC, which drops it.
      spdlog::info("the controller at {} closed the agent stream unanswered; using gRPC", uri);
      socket_path.clear();
    }
    if (!stopped) note_down(why.empty() ? "the controller closed the stream" : why);
    return acked;
  }

  void read_loop(ControllerStream* stream) {
    v1::ControllerMessage msg;
    while (stream->read(&msg)) {
      if (msg.heartbeat_interval() > 0) heartbeat = msg.heartbeat_interval();
      auto shared = std::make_shared<v1::ControllerMessage>(std::move(msg));
      loop.post([this, shared] { agent.handle(*shared); });
      msg = v1::ControllerMessage();
    }
    std::lock_guard lock(mu);
    stream_dead = true;
    cv.notify_all();
  }

  void write_loop(ControllerStream* stream) {
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
      if (!stream->write(msg)) return;
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
      if (current != nullptr) current->cancel();
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
