#include "cli/client/step_socket_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

#include <google/protobuf/io/coded_stream.h>

#include "net/big_endian.h"
#include "net/step_frames.h"
#include "net/unix_connect.h"
#include "util/unique_fd.h"

namespace corral::cli {

namespace {

constexpr size_t kReadChunk = 64 << 10;
// gRPC's codes, which step_rpc_error words for the user (this file needs no gRPC).
constexpr int kCancelled = 1;
constexpr int kUnavailable = 14;

class SocketStepStream final : public StepStream::Impl {
 public:
  SocketStepStream(StepSocketPool::Taken conn, std::weak_ptr<StepSocketPool> pool, uint64_t jobid, std::string address,
                   size_t max_frame)
      : fd_(std::move(conn.fd)),
        reused_(conn.reused),
        pool_(std::move(pool)),
        jobid_(jobid),
        address_(std::move(address)),
        reader_(max_frame) {}

  bool read(pb::StepServerMessage& msg) override {
    if (end_) return false;
    for (;;) {
      auto frame = reader_.next();
      if (!frame)
        return stop({Errc::internal,
                     "cannot talk to the step manager of job " + std::to_string(jobid_) + " at " + address_ +
                         ": it does not answer in corral's step protocol (an older corral-node?): " + frame.message()});
      if (*frame) {
        if ((*frame)->type == net::kStepFrameStatus) {
          auto st = net::parse_step_status((*frame)->payload);
          if (!st) return stop({Errc::internal, st.message()});
          keep_connection();
          if (st->code == 0) return stop(Status());
          return stop(step_rpc_error(st->code, st->message, jobid_, address_));
        }
        if (!msg.ParseFromString((*frame)->payload))
          return stop({Errc::internal, "the step manager sent a malformed message"});
        return true;
      }
      char buf[kReadChunk];
      const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && errno == EAGAIN) {
        // Waits in poll, for input only: a reader asleep in recv is also woken, for nothing,
        // each time the agent reads what this side wrote (the socket's write space), which
        // costs the agent a wake-up of this CPU per step.
        pollfd p{fd_.get(), POLLIN, 0};
        (void)::poll(&p, 1, -1);  // EINTR, or an error recv reports next
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (cancelled_) return stop(step_rpc_error(kCancelled, "", jobid_, address_));
        if (!heard_ && send_again()) continue;
        return stop(
            step_rpc_error(kUnavailable, n < 0 ? std::strerror(errno) : "the connection closed", jobid_, address_));
      }
      heard_ = true;
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  Status finish() override {
    if (!end_) {  // the caller stops early: nothing more is read
      cancel();
      end_ = Status();
    }
    return *end_;
  }

  bool send(const pb::StepClientMessage& msg) override {
    std::string frame;
    net::append_step_frame(frame, net::kStepFrameMessage, msg.SerializeAsString());
    return send_frame(std::move(frame));
  }

  bool send_create(const pb::StepSpec& spec) override { return send_frame(step_create_frame(spec)); }

  void close_writes() override {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return;
    write_closed_ = true;
    ::shutdown(fd_.get(), SHUT_WR);
  }

  void cancel() override {
    std::lock_guard lock(write_mu_);
    cancelled_ = true;
    write_closed_ = true;
    ::shutdown(fd_.get(), SHUT_RDWR);  // read() returns at once; the agent sees the client go
  }

 private:
  bool send_frame(std::string frame) {
    std::lock_guard lock(write_mu_);
    if (write_closed_) return false;
    if (++sent_ == 1 && reused_) first_ = frame;  // only a kept connection may need it again
    if (write_all(frame)) return true;
    if (sent_ == 1 && fresh_connection_locked()) return true;
    write_closed_ = true;
    return false;
  }

  // The call ended: the connection goes back to the pool for the next call, unless this
  // side closed it for writing (or cancelled), sent more than `create` (stdin could still
  // be on its way), or the agent sent more than the call.
  void keep_connection() {
    std::lock_guard lock(write_mu_);
    if (write_closed_ || sent_ != 1 || !reader_.empty()) return;
    write_closed_ = true;
    if (auto pool = pool_.lock()) pool->give_back(std::move(fd_));
  }

  bool write_all(const std::string& frame) {
    for (size_t done = 0; done < frame.size();) {
      const ssize_t n = ::send(fd_.get(), frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // A kept connection the agent closed as it was taken (it restarted, or it serves one
  // call per connection) ends before a byte of the answer: the call goes again, once, over
  // a new connection. Only when nothing but `create` was sent, so nothing can be lost or
  // doubled: an agent answers every `create` it reads before it closes.
  bool send_again() {
    std::lock_guard lock(write_mu_);
    return sent_ == 1 && !write_closed_ && fresh_connection_locked();
  }
  bool fresh_connection_locked() {
    if (!reused_) return false;
    reused_ = false;
    auto pool = pool_.lock();
    if (!pool) return false;
    auto fd = pool->connect();
    if (!fd) return false;
    fd_ = std::move(*fd);
    return write_all(first_);
  }

  bool stop(Status st) {
    end_ = std::move(st);
    return false;
  }
  bool stop(Error e) { return stop(Status(std::move(e))); }

  UniqueFd fd_;  // moved to the pool by keep_connection(), replaced by fresh_connection_locked(): under write_mu_
  bool reused_;  // fd_ came from the pool and no call went again yet: under write_mu_
  std::weak_ptr<StepSocketPool> pool_;
  uint64_t jobid_;
  std::string address_;
  net::StepFrameReader reader_;
  std::optional<Status> end_;
  std::mutex write_mu_;
  bool write_closed_ = false;           // under write_mu_
  unsigned sent_ = 0;                   // messages sent, under write_mu_: only `create` keeps the connection
  std::string first_;                   // the `create` frame, for a call that goes again
  bool heard_ = false;                  // a byte of the answer came (the reading thread's)
  std::atomic<bool> cancelled_{false};  // set under write_mu_
};

}  // namespace

std::string step_create_frame(const pb::StepSpec& spec) {
  // Protocol buffers' encoding of a message field: its tag (field number, wire type 2),
  // the length as a varint, then the message's own bytes.
  using google::protobuf::io::CodedOutputStream;
  constexpr uint32_t kLengthDelimited = 2;
  constexpr uint32_t kTag = (pb::StepClientMessage::kCreateFieldNumber << 3) | kLengthDelimited;
  const size_t size = spec.ByteSizeLong();
  const size_t payload = CodedOutputStream::VarintSize32(kTag) + CodedOutputStream::VarintSize64(size) + size;
  std::string frame;
  frame.reserve(net::kStepFrameHeader + payload);
  frame.push_back(static_cast<char>(net::kStepFrameMessage));
  net::put_be(frame, payload, 4);
  const size_t at = frame.size();
  frame.resize(at + payload);
  uint8_t* out = reinterpret_cast<uint8_t*>(frame.data() + at);
  out = CodedOutputStream::WriteVarint32ToArray(kTag, out);
  out = CodedOutputStream::WriteVarint64ToArray(size, out);
  spec.SerializeWithCachedSizesToArray(out);
  return frame;
}

Result<StepSocketPool::Taken> StepSocketPool::take() {
  for (;;) {
    UniqueFd fd;
    {
      std::lock_guard lock(mu_);
      if (idle_.empty()) break;
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
    // Idle means nothing to read: EOF is an agent that closed it (restarted, or one that
    // serves a call per connection), anything else is out of step.
    char byte;
    if (::recv(fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return Taken{std::move(fd), true};
  }
  auto fd = connect();
  if (!fd) return fd.error();
  return Taken{std::move(*fd), false};
}

Result<UniqueFd> StepSocketPool::connect() {
  auto connected = net::connect_unix(path_);
  if (!connected) return connected.error();
  UniqueFd fd = std::move(*connected);
  const std::string_view preface = net::kStepPreface;
  if (::send(fd.get(), preface.data(), preface.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(preface.size()))
    return Error{Errc::unavailable, std::strerror(errno)};
  return fd;
}

void StepSocketPool::give_back(UniqueFd fd) {
  std::lock_guard lock(mu_);
  if (keep_ && idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
}

Result<std::unique_ptr<StepStream::Impl>> open_step_socket(const std::shared_ptr<StepSocketPool>& pool, uint64_t jobid,
                                                           size_t max_frame) {
  auto fd = pool->take();
  if (!fd) return fd.error();
  return std::unique_ptr<StepStream::Impl>(
      std::make_unique<SocketStepStream>(std::move(*fd), pool, jobid, "unix:" + pool->path(), max_frame));
}

}  // namespace corral::cli
