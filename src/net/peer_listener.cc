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

Result<std::unique_ptr<PeerListener>> PeerListener::open(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return invalid(fmt::format("socket path {} is longer than {} bytes", path,
                               sizeof(addr.sun_path) - 1));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error(fmt::format("socket: {}", std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
      ::chmod(path.c_str(), 0777) < 0 || ::listen(fd, 512) < 0) {
    int e = errno;
    ::close(fd);
    return io_error(fmt::format("cannot listen on {}: {}", path, std::strerror(e)));
  }
  return std::unique_ptr<PeerListener>(new PeerListener(fd, path));  // private ctor
}

PeerListener::PeerListener(int fd, std::string path)
    : listen_fd_(fd), wake_fd_(::eventfd(0, EFD_CLOEXEC)), path_(std::move(path)) {}

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

std::optional<PeerCred> PeerListener::lookup(std::string_view peer) const {
  if (!peer.starts_with("fd:")) return std::nullopt;
  int fd = 0;
  for (char ch : peer.substr(3)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    fd = fd * 10 + (ch - '0');
  }
  std::lock_guard lk(mu_);
  auto it = creds_.find(fd);
  if (it == creds_.end()) return std::nullopt;
  return it->second;
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
    if (c < 0) continue;
    ucred uc{};
    socklen_t len = sizeof(uc);
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
      ::close(c);
      continue;
    }
    {
      // A reused descriptor number replaces the closed connection's entry.
      std::lock_guard lk(mu_);
      creds_[c] = PeerCred{uc.uid, uc.gid, uc.pid};
    }
    grpc::AddInsecureChannelFromFd(server, c);
  }
}

}  // namespace corral::net
