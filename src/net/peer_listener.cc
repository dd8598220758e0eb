#include "net/peer_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

namespace corral::net {

Result<std::unique_ptr<PeerListener>> PeerListener::open(const std::string& path, size_t fd_limit) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return invalid(fmt::format("socket path {} is longer than {} bytes", path, sizeof(addr.sun_path) - 1));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error(fmt::format("socket: {}", std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 || ::chmod(path.c_str(), 0777) < 0 ||
      ::listen(fd, 512) < 0) {
    int e = errno;
    ::close(fd);
    return io_error(fmt::format("cannot listen on {}: {}", path, std::strerror(e)));
  }
  return std::unique_ptr<PeerListener>(new PeerListener(fd, path, fd_limit));  // private ctor
}

PeerListener::PeerListener(int fd, std::string path, size_t fd_limit)
    : listen_fd_(fd), wake_fd_(::eventfd(0, EFD_CLOEXEC)), path_(std::move(path)), peers_(fd_limit) {}

PeerListener::~PeerListener() {
  stop();
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::unlink(path_.c_str());
}

void PeerListener::start(grpc::Server* server) {
  thread_ = std::thread([this, server] { accept_loop(server); });
}

void PeerListener::stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

std::optional<PeerCred> PeerListener::lookup(std::string_view peer) const { return peers_.lookup(peer); }

bool PeerListener::back_off(int err) {
  spdlog::warn("accept on {}: {}; new connections wait 100 ms", path_, std::strerror(err));
  pollfd wake{wake_fd_, POLLIN, 0};
  return ::poll(&wake, 1, 100) <= 0;  // only the wake descriptor stops the loop
}

void PeerListener::accept_loop(grpc::Server* server) {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll on {}: {}", path_, std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) && !back_off(errno)) return;
      continue;
    }
    ucred uc{};
    socklen_t len = sizeof(uc);
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
      ::close(c);
      continue;
    }
    grpc::AddInsecureChannelFromFd(server, peers_.adopt(c, PeerCred{uc.uid, uc.gid, uc.pid}));
  }
}

}  // namespace corral::net
