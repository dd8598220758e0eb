#include "cli/client/socket_watch.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include "net/rpc_frames.h"
#include "net/step_frames.h"
#include "net/unix_connect.h"
#include "util/unique_fd.h"

namespace corral::cli {

namespace {

constexpr int kUnavailable = 14;  // gRPC's UNAVAILABLE

class SocketWatch final : public WatchStream::Impl {
 public:
  SocketWatch(UniqueFd fd, size_t max_reply, WatchEnd end)
      : fd_(std::move(fd)), reader_(max_reply), end_(std::move(end)) {}

  bool read(pb::WatchReply& reply) override {
    while (!done_) {
      auto frame = reader_.next();
      if (!frame) return stop(kUnavailable, "corrald's stream is not in corral's rpc protocol: " + frame.message());
      if (*frame) {
        if ((*frame)->type == net::kStepFrameMessage) {
          if (reply.ParseFromString((*frame)->payload)) return true;
          return stop(kUnavailable, "corrald sent a malformed WatchReply");
        }
        auto st = net::parse_step_status((*frame)->payload);
        if (!st) return stop(kUnavailable, st.message());
        return stop(st->code, st->message);
      }
      char buf[64 << 10];
      const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (cancelled_) return stop(1, "cancelled");  // gRPC's CANCELLED
      if (n < 0) return stop(kUnavailable, net::errno_words(errno));
      if (n == 0) return stop(kUnavailable, "corrald closed the connection");
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    return false;
  }

  Status finish() override {
    if (code_ == 0) return {};
    return end_(code_, message_);
  }

  // Another thread: the blocked recv returns 0 at once.
  void cancel() override {
    cancelled_ = true;
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

 private:
  bool stop(int code, std::string message) {
    done_ = true;
    code_ = code;
    message_ = std::move(message);
    return false;
  }

  UniqueFd fd_;
  net::StepFrameReader reader_;
  WatchEnd end_;
  std::atomic<bool> cancelled_{false};
  bool done_ = false;
  int code_ = 0;
  std::string message_;
};

}  // namespace

Result<std::unique_ptr<WatchStream::Impl>> open_socket_watch(const std::string& path, std::string_view request,
                                                             size_t max_reply, WatchEnd end) {
  auto fd = net::connect_unix(path);
  if (!fd) return fd.error();
  std::string out(net::kRpcPreface);
  net::append_step_frame(out, net::kStepFrameMessage, net::rpc_call_payload(net::RpcMethod::watch, request));
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = ::send(fd->get(), out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{Errc::unavailable, net::errno_words(errno)};
    done += static_cast<size_t>(n);
  }
  return std::unique_ptr<WatchStream::Impl>(std::make_unique<SocketWatch>(std::move(*fd), max_reply, std::move(end)));
}

}  // namespace corral::cli
