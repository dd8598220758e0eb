#include "node/steps/step_socket.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include <grpcpp/support/status_code_enum.h>
#include <spdlog/spdlog.h>

#include "net/grpc_status.h"
#include "net/step_frames.h"

namespace corral::node {

namespace {

constexpr size_t kReadChunk = 64 << 10;  // per wake-up: one client's flood waits for the others

// Status frames carry gRPC's codes: the client words them as it words gRPC's.
constexpr int code(grpc::StatusCode c) { return static_cast<int>(c); }
constexpr int kOk = code(grpc::StatusCode::OK);
constexpr int kInvalidArgument = code(grpc::StatusCode::INVALID_ARGUMENT);
constexpr int kResourceExhausted = code(grpc::StatusCode::RESOURCE_EXHAUSTED);

}  // namespace

struct StepSocketServer::Conn {
  StepManager::ClientId id = 0;
  UniqueFd fd;
  uint32_t uid = 0;
  net::StepFrameReader reader;
  std::string out;
  size_t sent = 0;            // bytes of `out` written
  bool opened = false;        // `create` went to the step manager
  bool answered = false;      // the step manager ended the call (the step's exit, or a refusal)
  bool reading = true;        // until the client's end of stream
  bool ended = false;         // the status frame is queued: close once written
  bool served = false;        // a call before this one ended on this connection
  bool flush_posted = false;  // what is queued goes out at the end of this loop turn
  uint32_t watching = 0;      // the events registered

  explicit Conn(size_t max) : reader(max) {}
};

StepSocketServer::StepSocketServer(EventLoop& loop, StepManager& steps, size_t max_message, size_t per_user)
    : loop_(loop), steps_(steps), max_message_(max_message), per_user_(per_user) {}

StepSocketServer::~StepSocketServer() {
  for (auto& [id, c] : conns_) loop_.remove_fd(c->fd.get());
}

void StepSocketServer::adopt(UniqueFd fd, uint32_t uid) {
  if (auto n = per_uid_.find(uid); uid != 0 && n != per_uid_.end() && n->second >= per_user_) {
    std::string refusal;
    net::append_status_frame(refusal, kResourceExhausted,
                             "too many step connections from uid " + std::to_string(uid) + " on this agent (at most " +
                                 std::to_string(per_user_) + " at once)");
    (void)!::send(fd.get(), refusal.data(), refusal.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return;
  }
  auto c = std::make_unique<Conn>(max_message_);
  c->id = next_id_++;
  c->fd = std::move(fd);
  c->uid = uid;
  c->watching = EPOLLIN;
  const StepManager::ClientId id = c->id;
  if (auto st = loop_.add_fd(c->fd.get(), EPOLLIN, [this, id](uint32_t ev) { on_events(id, ev); }); !st) {
    spdlog::warn("step socket: {}", st.message());
    return;
  }
  ++per_uid_[uid];
  conns_.emplace(id, std::move(c));
}

void StepSocketServer::on_events(StepManager::ClientId id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if ((events & EPOLLIN) && c.reading && !read_some(c)) return;
  if ((events & EPOLLOUT) && !flush(c)) return;
  // Both directions closed: the client is gone (a half-close alone reads as EOF above).
  if ((events & (EPOLLHUP | EPOLLERR)) && !(c.reading && (events & EPOLLIN))) close(c);
}

bool StepSocketServer::read_some(Conn& c) {
  const StepManager::ClientId id = c.id;
  char buf[kReadChunk];
  const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return true;
    close(c);
    return false;
  }
  if (n == 0) {  // the client said all it will: the step goes on
    c.reading = false;
    if (!c.opened && c.served && c.reader.empty()) {
      close(c);  // done with its calls
      return false;
    }
    if (!c.opened)
      end(c, kInvalidArgument, "the client sent no step request");
    else
      watch(c);
    return alive(id);
  }
  c.reader.feed(std::string_view(buf, static_cast<size_t>(n)));
  return take_frames(c);
}

bool StepSocketServer::take_frames(Conn& c) {
  const StepManager::ClientId id = c.id;
  // What the step manager does with a frame may end the call (and close `c`, or start its
  // next call under another id): look again before each frame.
  while (alive(id) && !c.ended) {
    auto frame = c.reader.next();
    if (!frame) {
      c.reading = false;
      end(c, kInvalidArgument, frame.message());
      break;
    }
    if (!*frame) break;
    handle_frame(c, (*frame)->type, std::move((*frame)->payload));
  }
  return alive(id);
}

void StepSocketServer::handle_frame(Conn& c, uint8_t type, std::string&& payload) {
  v1::StepClientMessage msg;
  if (type != net::kStepFrameMessage || !msg.ParseFromString(payload)) {
    c.reading = false;
    end(c, kInvalidArgument, "step protocol: a malformed message");
    return;
  }
  if (c.opened) {
    steps_.client_message(c.id, std::move(msg));
    return;
  }
  if (!msg.has_create()) {
    c.reading = false;
    end(c, kInvalidArgument, "the first RunStep message must carry `create`");
    return;
  }
  c.opened = true;
  StepClientSink sink;
  sink.send = [this, id = c.id, alive = std::weak_ptr<bool>(alive_)](v1::StepServerMessage&& m) {
    if (alive.lock()) send(id, std::move(m));
  };
  sink.fail = [this, id = c.id, alive = std::weak_ptr<bool>(alive_)](const Error& e) {
    if (!alive.lock()) return;
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    it->second->answered = true;
    const grpc::Status st = net::to_grpc(e);
    end(*it->second, static_cast<int>(st.error_code()), st.error_message());
  };
  steps_.open(c.id, c.uid, std::move(*msg.mutable_create()), std::move(sink));
}

void StepSocketServer::send(StepManager::ClientId id, v1::StepServerMessage&& msg) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->ended) return;
  Conn& c = *it->second;
  if (c.out.size() - c.sent > max_unread_) {
    spdlog::warn("step socket: a client of uid {} has not read {} MiB of its step's output: taken for gone", c.uid,
                 (c.out.size() - c.sent) >> 20);
    close(c);
    return;
  }
  net::append_step_frame(c.out, net::kStepFrameMessage, msg.SerializeAsString());
  if (msg.has_exit()) {
    c.answered = true;
    end(c, kOk, "");
    return;
  }
  // Written at the end of the turn: what else the turn sends (often the step's exit, just
  // after its last output) goes in the same write, and wakes the client once.
  if (c.flush_posted) return;
  c.flush_posted = true;
  loop_.post([this, id, alive = std::weak_ptr<bool>(alive_)] {
    if (!alive.lock()) return;
    auto found = conns_.find(id);
    if (found == conns_.end() || !found->second->flush_posted) return;
    found->second->flush_posted = false;
    flush(*found->second);
  });
}

void StepSocketServer::end(Conn& c, int code, const std::string& message) {
  if (c.ended) return;
  c.ended = true;
  net::append_status_frame(c.out, code, message);
  flush(c);
}

bool StepSocketServer::flush(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      close(c);  // EPIPE, ECONNRESET: the client is gone
      return false;
    }
    c.sent += static_cast<size_t>(n);
  }
  if (c.sent == c.out.size()) {
    c.out.clear();
    c.sent = 0;
    if (c.ended) {
      // The client may send another call, unless it closed its side or sent frames the
      // ended call did not read (they would be taken for the next call's).
      if (c.reading && c.opened && c.reader.empty())
        next_call(c);
      else
        close(c);
      return false;
    }
  } else if (c.sent > c.out.size() / 2) {  // a client that reads slowly: keep only what it has not
    c.out.erase(0, c.sent);
    c.sent = 0;
  }
  watch(c);
  return true;
}

void StepSocketServer::watch(Conn& c) {
  const uint32_t want = (c.reading ? EPOLLIN : 0u) | (c.out.empty() ? 0u : EPOLLOUT);
  if (want == c.watching) return;
  c.watching = want;
  if (auto st = loop_.set_events(c.fd.get(), want); !st) spdlog::warn("step socket: {}", st.message());
}

void StepSocketServer::next_call(Conn& c) {
  auto it = conns_.find(c.id);
  std::unique_ptr<Conn> conn = std::move(it->second);
  conns_.erase(it);
  conn->id = next_id_++;
  conn->opened = conn->answered = conn->ended = conn->flush_posted = false;
  conn->served = true;
  conn->watching = EPOLLIN;
  const StepManager::ClientId id = conn->id;
  // Under the new id: what the old call's handler still had coming is dropped.
  if (auto st = loop_.rewatch_fd(conn->fd.get(), EPOLLIN, [this, id](uint32_t ev) { on_events(id, ev); }); !st) {
    spdlog::warn("step socket: {}", st.message());
    if (auto n = per_uid_.find(conn->uid); n != per_uid_.end() && --n->second == 0) per_uid_.erase(n);
    return;
  }
  conns_.emplace(id, std::move(conn));
}

void StepSocketServer::close(Conn& c) {
  const StepManager::ClientId id = c.id;
  // A step the step manager has not ended loses its client (gone, or refused by us for a
  // bad frame after `create`): it is ended as when a gRPC call is cancelled.
  const bool tell = c.opened && !c.answered;
  loop_.remove_fd(c.fd.get());
  if (auto n = per_uid_.find(c.uid); n != per_uid_.end() && --n->second == 0) per_uid_.erase(n);
  conns_.erase(id);  // `c` is gone; what the step manager answers below finds no connection
  if (tell) steps_.client_gone(id);
}

}  // namespace corral::node
