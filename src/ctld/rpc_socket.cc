#include "ctld/rpc_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/support/status_code_enum.h>
#include <spdlog/spdlog.h>

#include "net/grpc_status.h"
#include "net/rpc_frames.h"

namespace corral::ctld {

namespace {

constexpr size_t kReadChunk = 64 << 10;  // per wake-up: one client's flood waits for the others
// An answer up to this size is written by the thread that ran the call (see answer()).
constexpr size_t kDirectAnswer = 16 << 10;

using net::grpc_code;
constexpr int code(grpc::StatusCode c) { return static_cast<int>(c); }

std::string status_frame(int code, std::string_view message) {
  std::string out;
  net::append_status_frame(out, code, message);
  return out;
}

}  // namespace

struct RpcSocketServer::Conn {
  uint64_t id = 0;
  UniqueFd fd;
  Caller caller;
  net::StepFrameReader reader;
  size_t accounted = 0;         // of reader.buffered(), counted in the user's bytes
  size_t answer_accounted = 0;  // of the answer not yet written, counted in the user's answers
  std::string out;
  size_t sent = 0;
  uint32_t watching = 0;
  EventLoop::Clock::time_point last_answer;  // or the connection's start
  EventLoop::Clock::time_point began;        // the first byte of the call being received
  EventLoop::Clock::time_point last_write;   // the last bytes of an answer the client took
  bool closing = false;                      // close once `out` is written
  bool calling = false;                      // a call of this connection is running

  explicit Conn(size_t max) : reader(max) {}
};

Result<std::unique_ptr<RpcSocketServer>> RpcSocketServer::start(Dispatch dispatch, Watch watch, const Limits& limits) {
  auto loop = EventLoop::create();
  if (!loop) return loop.error();
  auto s = std::make_unique<RpcSocketServer>(std::move(dispatch), std::move(watch), limits, std::move(*loop));
  s->loop_->add_timer(limits.sweep_seconds, [p = s.get()] { p->sweep(); });
  s->thread_ = std::thread([p = s.get()] { p->loop_->run(); });
  return s;
}

RpcSocketServer::RpcSocketServer(Dispatch dispatch, Watch watch, const Limits& limits, std::unique_ptr<EventLoop> loop)
    : dispatch_(std::move(dispatch)),
      watch_(std::move(watch)),
      limits_(limits),
      loop_(std::move(loop)),
      pool_(limits.threads) {
  if (limits_.per_user_bytes == 0) limits_.per_user_bytes = 2 * limits_.max_request;
  if (limits_.per_user_answers == 0) limits_.per_user_answers = 2 * limits_.max_answer;
}

RpcSocketServer::~RpcSocketServer() {
  stopping_ = true;
  loop_->post([this] {
    while (!conns_.empty()) close(conns_.begin()->first);
    loop_->stop();
  });
  if (thread_.joinable()) thread_.join();
  for (auto& [id, t] : watchers_) t.join();  // each ends within its subscription's next wait
}

void RpcSocketServer::adopt(UniqueFd fd, Caller caller) {
  loop_->post(
      [this, fd = fd.release(), caller = std::move(caller)]() mutable { take(UniqueFd(fd), std::move(caller)); });
}

void RpcSocketServer::take(UniqueFd fd, Caller caller) {
  PerUser& user = per_uid_[caller.uid];
  if (caller.uid != 0 && user.conns >= limits_.per_user) {
    const std::string refusal = status_frame(
        code(grpc::StatusCode::RESOURCE_EXHAUSTED),
        fmt::format("too many connections from uid {} to corrald (at most {} at once)", caller.uid, limits_.per_user));
    (void)!::send(fd.get(), refusal.data(), refusal.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return;
  }
  auto c = std::make_unique<Conn>(limits_.max_request);
  c->id = next_id_++;
  c->fd = std::move(fd);
  c->caller = std::move(caller);
  c->last_answer = EventLoop::Clock::now();
  const uint64_t id = c->id;
  if (auto st = loop_->add_fd(c->fd.get(), EPOLLIN, [this, id](uint32_t ev) { on_events(id, ev); }); !st) {
    spdlog::warn("rpc socket: cannot watch a connection: {}", st.message());
    if (user.conns == 0) per_uid_.erase(c->caller.uid);
    return;
  }
  c->watching = EPOLLIN;
  ++user.conns;
  conns_.emplace(id, std::move(c));
}

void RpcSocketServer::on_events(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.calling) {  // nothing is watched but the end: the answer has nobody to go to
    if (events & (EPOLLHUP | EPOLLERR)) close(id);
    return;
  }
  if ((events & EPOLLOUT) && !(flush(c) && answer_calls(c))) return;
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c.out.empty() && !(read_some(c) && answer_calls(c))) return;
  watch(c);
}

bool RpcSocketServer::read_some(Conn& c) {
  char buf[kReadChunk];
  const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) {
    close(c.id);
    return false;
  }
  if (c.reader.empty()) c.began = EventLoop::Clock::now();
  c.reader.feed(std::string_view(buf, static_cast<size_t>(n)));
  account(c);
  if (per_uid_[c.caller.uid].bytes > limits_.per_user_bytes && c.caller.uid != 0) {
    refuse(c, code(grpc::StatusCode::RESOURCE_EXHAUSTED),
           fmt::format("uid {} is sending corrald more than {} bytes of calls at once", c.caller.uid,
                       limits_.per_user_bytes));
    return flush(c);
  }
  return true;
}

bool RpcSocketServer::answer_calls(Conn& c) {
  while (c.out.empty() && !c.closing && !c.calling) {
    auto frame = c.reader.next();
    if (!frame) {
      refuse(c, code(grpc::StatusCode::INVALID_ARGUMENT), frame.message());
    } else if (!*frame) {
      break;
    } else if ((*frame)->type != net::kStepFrameMessage) {
      refuse(c, code(grpc::StatusCode::INVALID_ARGUMENT), "rpc protocol: a client sends only call frames");
    } else {
      answer(c, (*frame)->payload);
    }
    account(c);
    if (!flush(c)) return false;
  }
  return true;
}

void RpcSocketServer::account(Conn& c) {
  PerUser& user = per_uid_[c.caller.uid];
  user.bytes = user.bytes - c.accounted + c.reader.buffered();
  c.accounted = c.reader.buffered();
  const size_t unwritten = c.out.size() - c.sent;
  user.answers = user.answers - c.answer_accounted + unwritten;
  c.answer_accounted = unwritten;
}

void RpcSocketServer::refuse(Conn& c, int code, std::string_view message) {
  c.out = status_frame(code, message);
  c.sent = 0;
  c.closing = true;
  c.last_write = EventLoop::Clock::now();
}

void RpcSocketServer::answer(Conn& c, std::string_view payload) {
  auto call = net::parse_rpc_call(payload);
  if (!call) {
    c.out = status_frame(code(grpc::StatusCode::UNIMPLEMENTED),
                         "rpc protocol: unknown method (a newer client than this corrald?)");
    return;
  }
  if (call->method == net::RpcMethod::watch) {
    start_watch(c, call->request);
    return;
  }
  c.calling = true;
  // The call's thread writes a small answer itself, on its own copy of the descriptor
  // (the connection may be closed meanwhile, and its number reused): the client has it
  // one wake-up of this loop sooner. The loop takes the rest, and the connection, back.
  auto own = std::make_shared<UniqueFd>(::fcntl(c.fd.get(), F_DUPFD_CLOEXEC, 0));
  pool_.run(c.caller.uid, [this, id = c.id, caller = c.caller, method = call->method,
                           request = std::string(call->request), own = std::move(own)] {
    std::string reply;
    Status st = dispatch_(caller, method, request, &reply);
    // A bigger answer (a listing) is framed once, by the loop, with the caller's unread
    // answers counted; a small one is not counted: at most kDirectAnswer a connection.
    std::string out;
    size_t sent = 0;
    if (own->valid() && reply.size() + st.message().size() < kDirectAnswer) {
      out = frame_answer(st, reply, caller.uid, 0);
      const ssize_t n = ::send(own->get(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      sent = n > 0 ? static_cast<size_t>(n) : 0;
    }
    own->reset();
    loop_->post([this, id, st = std::move(st), reply = std::move(reply), out = std::move(out), sent]() mutable {
      finish_call(id, sent > 0 ? std::move(out) : std::string(), sent, std::move(st), std::move(reply));
    });
  });
}

namespace {

// A watch's replies onto its connection, from the watch's thread. A client that takes
// nothing for `idle` seconds, hangs up or sends anything more is gone.
class SocketWatchSink final : public WatchSink {
 public:
  SocketWatchSink(int fd, double idle, const std::atomic<bool>& stopping)
      : fd_(fd), idle_ms_(static_cast<int>(idle * 1000)), stopping_(stopping) {}
  bool write(const std::string& reply) override {
    out_.clear();
    net::append_step_frame(out_, net::kStepFrameMessage, reply);
    return send_all(out_);
  }
  bool gone() override {
    if (stopping_) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) != 0;  // input, a hang-up or an error: a client says nothing here
  }
  bool send_all(std::string_view data) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || errno != EAGAIN || stopping_) return false;
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, idle_ms_) <= 0) return false;
    }
    return true;
  }

 private:
  int fd_;
  int idle_ms_;
  const std::atomic<bool>& stopping_;
  std::string out_;
};

}  // namespace

void RpcSocketServer::start_watch(Conn& c, std::string_view request) {
  if (watchers_.size() >= limits_.watches) {
    refuse(c, code(grpc::StatusCode::RESOURCE_EXHAUSTED),
           fmt::format("corrald serves at most {} watches at once; try again later", limits_.watches));
    return;
  }
  UniqueFd own(::fcntl(c.fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) {
    refuse(c, code(grpc::StatusCode::RESOURCE_EXHAUSTED), "corrald is out of file descriptors");
    return;
  }
  c.calling = true;  // the loop now only notices a hang-up; the stream is the thread's
  watchers_.emplace(c.id, std::thread([this, caller = c.caller, fd = own.release(), request = std::string(request),
                                       id = c.id]() mutable {
                      serve_watch(std::move(caller), UniqueFd(fd), std::move(request));
                      loop_->post([this, id] { end_watch(id); });
                    }));
}

void RpcSocketServer::serve_watch(Caller caller, UniqueFd fd, std::string request) {
  SocketWatchSink sink(fd.get(), limits_.idle_seconds, stopping_);
  const Status st = watch_(caller, request, sink);
  if (stopping_) return;
  std::string out;
  net::append_status_frame(out, grpc_code(st), st ? "" : st.message());
  (void)sink.send_all(out);
}

void RpcSocketServer::end_watch(uint64_t id) {
  if (auto it = watchers_.find(id); it != watchers_.end()) {
    it->second.join();  // its function has returned: this waits for the thread's exit only
    watchers_.erase(it);
  }
  close(id);  // a watch's connection carries nothing after its stream
}

// The frames of an answer: the reply (only on success) and the status. `waiting`: the
// caller's answers not yet read, which a big reply may not add to.
std::string RpcSocketServer::frame_answer(Status st, const std::string& reply, uint32_t uid, size_t waiting) const {
  if (st && reply.size() > limits_.max_answer)
    st =
        Error{Errc::resource_exhausted,
              fmt::format("the answer is {} bytes, over corrald's limit of {}: ask for less (--count, a state, a user)",
                          reply.size(), limits_.max_answer)};
  else if (st && waiting + reply.size() > limits_.per_user_answers)
    st = Error{Errc::resource_exhausted,
               fmt::format("uid {} has {} bytes of answers from corrald not yet read; read them first", uid, waiting)};
  std::string out;
  if (st) net::append_step_frame(out, net::kStepFrameMessage, reply);
  net::append_status_frame(out, grpc_code(st), st ? "" : st.message());
  return out;
}

void RpcSocketServer::finish_call(uint64_t id, std::string&& framed, size_t sent, Status st, std::string&& reply) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;  // closed meanwhile
  Conn& c = *it->second;
  c.calling = false;
  if (sent > 0) {  // written in part or whole by the call's thread: the rest goes from here
    c.out = std::move(framed);
    c.sent = sent;
  } else {
    c.out = frame_answer(std::move(st), reply, c.caller.uid, c.caller.uid == 0 ? 0 : per_uid_[c.caller.uid].answers);
    c.sent = 0;
  }
  c.last_answer = c.last_write = EventLoop::Clock::now();
  account(c);
  if (flush(c) && answer_calls(c)) watch(c);
}

bool RpcSocketServer::flush(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      account(c);
      return true;
    }
    if (n <= 0) {
      close(c.id);
      return false;
    }
    c.sent += static_cast<size_t>(n);
    c.last_write = EventLoop::Clock::now();
  }
  c.out.clear();
  c.sent = 0;
  account(c);
  if (c.closing) {
    close(c.id);
    return false;
  }
  return true;
}

void RpcSocketServer::watch(Conn& c) {
  const uint32_t want = c.calling ? 0u : c.out.empty() ? uint32_t{EPOLLIN} : uint32_t{EPOLLOUT};
  if (want == c.watching) return;
  if (loop_->set_events(c.fd.get(), want)) c.watching = want;
}

void RpcSocketServer::close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  loop_->remove_fd(c.fd.get());
  if (auto u = per_uid_.find(c.caller.uid); u != per_uid_.end()) {
    u->second.bytes -= c.accounted;
    u->second.answers -= c.answer_accounted;
    if (--u->second.conns == 0) per_uid_.erase(u);
  }
  conns_.erase(it);
}

// Idle connections, calls begun but not finished in time and answers not read hold a
// descriptor and memory.
void RpcSocketServer::sweep() {
  const auto now = EventLoop::Clock::now();
  const auto idle = std::chrono::duration<double>(limits_.idle_seconds);
  const auto partial = std::chrono::duration<double>(limits_.partial_seconds);
  std::vector<uint64_t> late;
  for (const auto& [id, c] : conns_) {
    if (c->calling) continue;
    // An answer the client stopped reading holds its memory: as long as an idle connection.
    if (!c->out.empty() ? now - c->last_write > idle
                        : (c->reader.empty() ? now - c->last_answer > idle : now - c->began > partial))
      late.push_back(id);
  }
  for (uint64_t id : late) close(id);
  loop_->add_timer(limits_.sweep_seconds, [this] { sweep(); });
}

}  // namespace corral::ctld
