#include "net/peer_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

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

void PeerListener::divert(std::string preface, Handler handler) {
  diversions_.push_back({std::move(preface), std::move(handler)});
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

bool PeerListener::decide(Undecided& u, grpc::Server* server) {
  char buf[64];
  const ssize_t n = ::recv(u.fd.get(), buf, sizeof buf, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) return true;  // gone before it said anything: closed with `u`
  const std::string_view got(buf, static_cast<size_t>(n));
  bool may_be_one = false;  // what came so far begins a preface: wait for the rest
  for (const auto& d : diversions_) {
    if (got.size() < d.preface.size()) {
      may_be_one = may_be_one || d.preface.compare(0, got.size(), got) == 0;
      continue;
    }
    if (got.substr(0, d.preface.size()) != d.preface) continue;
    (void)!::recv(u.fd.get(), buf, d.preface.size(), 0);
    d.handler(std::move(u.fd), u.cred);
    return true;
  }
  if (may_be_one) return false;
  grpc::AddInsecureChannelFromFd(server, peers_.adopt(u.fd.release(), u.cred));
  return true;
}

void PeerListener::accept_loop(grpc::Server* server) {
  std::vector<Undecided> undecided;  // only with a handler: connections not yet told apart
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
    auto now = std::chrono::steady_clock::now();
    int timeout = -1;
    for (const auto& u : undecided) {
      fds.push_back({u.fd.get(), POLLIN, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(u.deadline - now).count();
      timeout = std::clamp(static_cast<int>(left) + 1, 0, timeout < 0 ? INT_MAX : timeout);
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll on {}: {}", path_, std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    now = std::chrono::steady_clock::now();
    size_t kept = 0;
    for (size_t i = 0; i < undecided.size(); ++i) {
      Undecided& u = undecided[i];
      const bool done = (fds[i + 2].revents != 0 && decide(u, server)) || now >= u.deadline;
      if (!done) undecided[kept++] = std::move(u);
    }
    undecided.resize(kept);
    if (!fds[0].revents) continue;
    int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) && !back_off(errno)) return;
      continue;
    }
    UniqueFd conn(c);
    ucred uc{};
    socklen_t len = sizeof(uc);
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) continue;
    const PeerCred cred{uc.uid, uc.gid, uc.pid};
    if (diversions_.empty()) {
      grpc::AddInsecureChannelFromFd(server, peers_.adopt(conn.release(), cred));
      continue;
    }
    Undecided u{std::move(conn), cred, now + kDecideWithin};
    if (decide(u, server)) continue;  // a client that wrote before we accepted: decided at once
    if (undecided.size() >= kMaxUndecided) undecided.erase(undecided.begin());
    undecided.push_back(std::move(u));
  }
}

}  // namespace corral::net
