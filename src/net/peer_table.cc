#include "net/peer_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace corral::net {

namespace {
constexpr size_t kMinRange = 512;
constexpr size_t kMaxFd = 1 << 24;   // far beyond any real limit, well inside an int
constexpr size_t kSweepEvery = 256;  // connections between two sweeps
}  // namespace

PeerTable::PeerTable(size_t fd_limit) {
  size_t hi = std::min(fd_limit, kMaxFd);
  if (hi / 2 >= kMinRange) {
    hi_ = static_cast<int>(hi);
    lo_ = static_cast<int>(hi / 2);
    next_ = lo_;
  }
}

int PeerTable::renumber(int fd) {
  if (hi_ == 0) return fd;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int n = ::fcntl(fd, F_DUPFD_CLOEXEC, next_);
    if (n >= 0 && n < hi_) {
      ::close(fd);
      next_ = n + 1 >= hi_ ? lo_ : n + 1;
      return n;
    }
    if (n >= 0) ::close(n);
    next_ = lo_;  // the top of the range is taken: wrap around once
  }
  return fd;  // the whole range is in use: keep the kernel's number
}

int PeerTable::adopt(int fd, const PeerCred& cred) {
  std::lock_guard lk(mu_);
  if (++adopted_ % kSweepEvery == 0) sweep_locked();
  int n = renumber(fd);
  creds_[n] = cred;  // a number is free only once gRPC closed its last connection
  return n;
}

std::optional<PeerCred> PeerTable::lookup(std::string_view peer) const {
  if (!peer.starts_with("fd:") || peer.size() > 13) return std::nullopt;
  long fd = 0;
  for (char ch : peer.substr(3)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    fd = fd * 10 + (ch - '0');
  }
  if (fd > INT_MAX) return std::nullopt;
  std::lock_guard lk(mu_);
  auto it = creds_.find(static_cast<int>(fd));
  if (it == creds_.end()) return std::nullopt;
  return it->second;
}

void PeerTable::sweep() {
  std::lock_guard lk(mu_);
  sweep_locked();
}

void PeerTable::sweep_locked() {
  for (auto it = creds_.begin(); it != creds_.end();)
    it = ::fcntl(it->first, F_GETFD) < 0 ? creds_.erase(it) : std::next(it);
}

size_t PeerTable::size() const {
  std::lock_guard lk(mu_);
  return creds_.size();
}

}  // namespace corral::net
