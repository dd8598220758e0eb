#include "cli/client/rpc_socket_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "net/unix_connect.h"

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

Error unavailable(std::string why) { return {Errc::unavailable, std::move(why)}; }

// Milliseconds left until `end` (0 once past), for poll.
int left_ms(Clock::time_point end) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}

// Waits for `events` on `fd` until `end`: false when the deadline passed.
bool wait_for(int fd, short events, Clock::time_point end) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, left_ms(end));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the next read or write says what is wrong
  }
}

}  // namespace

Status RpcSocketClient::connect() {
  auto fd = net::connect_unix(path_);
  if (!fd) return fd.error();
  fd_ = std::move(*fd);
  return {};
}

Result<RpcSocketClient::Answer> RpcSocketClient::call(net::RpcMethod method, std::string_view request,
                                                      double deadline_seconds) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<long long>(deadline_seconds * 1000));
  if (fd_.valid() && Clock::now() - last_answer_ > kReuseWithin) fd_.reset();
  const bool fresh = !fd_.valid();
  if (fresh)
    if (auto st = connect(); !st) return st.error();
  std::string out = fresh ? std::string(net::kRpcPreface) : std::string();
  net::append_step_frame(out, net::kStepFrameMessage, net::rpc_call_payload(method, request));
  auto fail = [this](Error e) {
    fd_.reset();  // the stream's place is lost: the next call starts afresh
    return e;
  };
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = ::send(fd_.get(), out.data() + done, out.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!wait_for(fd_.get(), POLLOUT, end)) return fail(unavailable("no answer within the deadline"));
      continue;
    }
    if (n <= 0) return fail(unavailable(net::errno_words(errno)));
    done += static_cast<size_t>(n);
  }
  net::StepFrameReader reader(max_reply_);
  Answer a;
  for (;;) {
    auto frame = reader.next();
    if (!frame) return fail({Errc::internal, "corrald's answer is not in corral's rpc protocol: " + frame.message()});
    if (*frame) {
      if ((*frame)->type == net::kStepFrameMessage) {
        a.reply = std::move((*frame)->payload);
        continue;
      }
      auto st = net::parse_step_status((*frame)->payload);
      if (!st) return fail({Errc::internal, st.message()});
      a.code = st->code;
      a.message = std::move(st->message);
      if (!reader.empty()) return fail({Errc::internal, "corrald sent more than one answer"});
      last_answer_ = Clock::now();
      return a;
    }
    if (!wait_for(fd_.get(), POLLIN, end)) return fail(unavailable("no answer within the deadline"));
    char buf[64 << 10];
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return fail(unavailable(net::errno_words(errno)));
    if (n == 0) return fail(unavailable("corrald closed the connection without an answer"));
    reader.feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace corral::cli
