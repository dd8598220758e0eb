#include "authd/sign_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/authd_wire.h"
#include "net/cluster_cred.h"
#include "util/read_exactly.h"

namespace corral::authd {

namespace {

void answer(int fd, bool ok, std::string_view text) {
  const std::string out = net::encode_authd_answer(ok, text);
  (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);  // a caller that left loses its answer
}

}  // namespace

Result<std::unique_ptr<SignServer>> SignServer::open(const std::string& path, std::string key, std::string origin) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return invalid(fmt::format("socket path {} is longer than {} bytes", path, sizeof(addr.sun_path) - 1));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  if (!fd.valid() || !wake.valid()) return io_error(fmt::format("socket: {}", std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::chmod(path.c_str(), 0777) != 0 ||
      ::listen(fd.get(), 512) != 0)
    return io_error(fmt::format("cannot listen on {}: {}", path, std::strerror(errno)));
  return std::unique_ptr<SignServer>(
      new SignServer(std::move(fd), std::move(wake), path, std::move(key), std::move(origin)));  // private ctor
}

SignServer::SignServer(UniqueFd listen, UniqueFd wake, std::string path, std::string key, std::string origin)
    : listen_(std::move(listen)),
      wake_(std::move(wake)),
      path_(std::move(path)),
      key_(std::move(key)),
      origin_(std::move(origin)) {}

// Waits for the connections still being served: their threads use this object.
SignServer::~SignServer() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return total_ == 0; });
  ::unlink(path_.c_str());
}

void SignServer::stop() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void SignServer::run() {
  pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no busy loop on a ready socket
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    if (!admit(cred.uid)) {
      answer(conn.get(), false, "too many requests from this user at once; try again shortly");
      continue;
    }
    std::thread([this, c = std::move(conn), uid = cred.uid, gid = cred.gid]() mutable {
      serve(std::move(c), uid, gid);
      release(uid);
    }).detach();
  }
}

bool SignServer::admit(uid_t uid) {
  std::lock_guard lock(mu_);
  if (total_ >= kTotal || busy_[uid] >= kPerUser) return false;
  ++busy_[uid];
  ++total_;
  return true;
}

void SignServer::release(uid_t uid) {
  std::lock_guard lock(mu_);
  if (--busy_[uid] == 0) busy_.erase(uid);
  if (--total_ == 0) idle_.notify_all();
}

void SignServer::serve(UniqueFd conn, uid_t uid, gid_t gid) {
  timeval limit{2, 0};
  ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  std::string request;
  if (!read_exactly(conn.get(), request, net::kAuthdRequestHeader)) return;
  auto n = net::authd_payload_length(request);
  if (!n) return answer(conn.get(), false, n.message());
  if (!read_exactly(conn.get(), request, *n)) return;
  net::AuthdRequest req = net::decode_authd_request(request);
  net::ClusterCred cred;
  cred.uid = static_cast<uint32_t>(uid);
  cred.gid = static_cast<uint32_t>(gid);
  cred.restrict_uid = req.restrict_uid;
  cred.origin = origin_;
  cred.payload = std::move(req.payload);
  auto sealed = net::seal_cluster_cred(key_, std::move(cred), net::cluster_cred_now());
  if (!sealed) {
    spdlog::error("cannot sign for uid {}: {}", uid, sealed.message());
    return answer(conn.get(), false, sealed.message());
  }
  spdlog::debug("signed a credential for uid {}", uid);
  answer(conn.get(), true, *sealed);
}

}  // namespace corral::authd
