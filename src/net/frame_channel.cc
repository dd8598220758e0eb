#include "net/frame_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <fmt/format.h>

#include "net/big_endian.h"
#include "net/unix_connect.h"

namespace corral::net {

FrameChannel::FrameChannel(UniqueFd fd, size_t max_in) : fd_(std::move(fd)), reader_(max_in) {
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd_.get(), F_SETFL, flags & ~O_NONBLOCK);
}

Result<StepFrameReader::Frame> FrameChannel::read() {
  char buf[64 * 1024];
  for (;;) {
    auto frame = reader_.next();
    if (!frame) return frame.error();
    if (*frame) {
      heard_ = true;
      return std::move(**frame);
    }
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n > 0) {
      reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Error{Errc::unavailable, "the connection was closed"};
    return Error{Errc::unavailable, errno_words(errno)};
  }
}

Result<StepFrameReader::Frame> FrameChannel::read_within(int ms) {
  if (reader_.empty()) {
    pollfd p{fd_.get(), POLLIN, 0};
    int rc;
    do rc = ::poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    if (rc == 0) return Error{Errc::unavailable, fmt::format("nothing was sent within {} ms", ms)};
  }
  return read();
}

bool FrameChannel::write(uint8_t type, std::string_view payload) {
  std::string header(1, static_cast<char>(type));
  put_be(header, payload.size(), 4);
  iovec iov[2] = {{header.data(), header.size()}, {const_cast<char*>(payload.data()), payload.size()}};
  iovec* next = iov;
  int left = 2;
  while (left > 0) {
    msghdr m{};
    m.msg_iov = next;
    m.msg_iovlen = static_cast<size_t>(left);
    // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE.
    const ssize_t n = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    auto done = static_cast<size_t>(n);
    while (left > 0 && done >= next->iov_len) {
      done -= next->iov_len;
      ++next;
      --left;
    }
    if (left > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + done;
      next->iov_len -= done;
    }
  }
  return true;
}

void FrameChannel::shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

}  // namespace corral::net
