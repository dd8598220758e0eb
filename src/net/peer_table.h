// Which user is behind each connection a daemon accepted on its Unix socket.
//
// gRPC names a connection we hand it as "fd:N", and that name is all a call carries. If
// N were the number accept() returned, the kernel would give the same number to the next
// connection as soon as gRPC closed the last one, and a call still in flight on the old
// connection could be taken for the new caller. So each accepted connection is moved to
// a number of our own choosing in the top half of the descriptor range, handed out
// round-robin: a number names one connection, and comes back only after every other
// number of the range was used (half a million connections at the usual hard limit).
// The credentials are read from the socket (SO_PEERCRED) when it is accepted, before
// gRPC has seen a byte, and are never looked up again.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string_view>

namespace corral::net {

struct PeerCred {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

class PeerTable {
 public:
  // `fd_limit`: the process's descriptor limit (raise_fd_limit()). Below 512 numbers
  // to spare, connections keep the number accept() gave them.
  explicit PeerTable(size_t fd_limit);

  // Takes ownership of `fd` and returns the descriptor to hand to gRPC (the same
  // connection, possibly renumbered), remembering `cred` for it; -1 if it was closed.
  int adopt(int fd, const PeerCred& cred);
  // Credentials of the connection gRPC calls `peer` ("fd:N").
  std::optional<PeerCred> lookup(std::string_view peer) const;
  // Forgets connections gRPC has closed (their numbers are no longer open).
  void sweep();
  size_t size() const;

 private:
  int renumber(int fd);
  void sweep_locked();

  int lo_ = 0, hi_ = 0, next_ = 0;  // the range [lo_, hi_) and where the next search starts
  size_t adopted_ = 0;
  mutable std::mutex mu_;
  std::map<int, PeerCred> creds_;
};

}  // namespace corral::net
