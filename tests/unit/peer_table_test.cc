// Identity is bound to each accepted connection: a descriptor number gRPC sees names
// one connection, never the next caller's.
#include "net/peer_table.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include <gtest/gtest.h>

#include "util/fd_hygiene.h"

namespace corral::net {
namespace {

int socket_fd() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(sv[1]);
  return sv[0];
}

std::string peer(int fd) { return "fd:" + std::to_string(fd); }

TEST(PeerTable, AClosedConnectionsNumberIsNotTheNextCallersName) {
  PeerTable table(raise_fd_limit());
  const int alice = table.adopt(socket_fd(), PeerCred{1001, 1001, 11});
  ASSERT_GE(alice, 0);
  ASSERT_EQ(table.lookup(peer(alice))->uid, 1001u);
  ::close(alice);                                                // gRPC closes Alice's connection...
  const int bob = table.adopt(socket_fd(), PeerCred{0, 0, 12});  // ...and root connects
  // The kernel would have reused Alice's number; the table gives root another one, so a
  // call still in flight on Alice's connection can never be taken for root's.
  EXPECT_NE(bob, alice);
  auto late = table.lookup(peer(alice));
  EXPECT_TRUE(!late || late->uid == 1001u);
  EXPECT_EQ(table.lookup(peer(bob))->uid, 0u);
  ::close(bob);
}

TEST(PeerTable, NumbersComeBackOnlyAfterTheWholeRange) {
  PeerTable table(raise_fd_limit());
  std::set<int> seen;
  for (int i = 0; i < 300; ++i) {
    int fd = table.adopt(socket_fd(), PeerCred{static_cast<uid_t>(i), 0, 0});
    EXPECT_TRUE(seen.insert(fd).second) << "number " << fd << " given out twice";
    ::close(fd);
  }
  table.sweep();
  EXPECT_EQ(table.size(), 0u);  // closed connections are forgotten
}

TEST(PeerTable, RenumberedConnectionsAreCloseOnExecAndOthersStayUnknown) {
  PeerTable table(raise_fd_limit());
  int fd = table.adopt(socket_fd(), PeerCred{5, 5, 5});
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(table.lookup("fd:" + std::to_string(fd + 1)));
  EXPECT_FALSE(table.lookup("ipv4:127.0.0.1:5"));
  EXPECT_FALSE(table.lookup("fd:99999999999999"));
  EXPECT_FALSE(table.lookup("fd:1x"));
  ::close(fd);
}

TEST(PeerTable, ASmallLimitKeepsTheKernelsNumbers) {
  PeerTable table(256);
  int raw = socket_fd();
  EXPECT_EQ(table.adopt(raw, PeerCred{}), raw);
  ::close(raw);
}

}  // namespace
}  // namespace corral::net
