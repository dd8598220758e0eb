#include "net/unix_connect.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace corral::net {
namespace {

TEST(OwnProtocolSocket, UnixAddressesUnlessTheEnvironmentAsksForGrpc) {
  ::unsetenv("CORRAL_TEST_TRANSPORT");
  EXPECT_EQ(own_protocol_socket("unix:/run/corral/corrald.sock", "CORRAL_TEST_TRANSPORT"), "/run/corral/corrald.sock");
  EXPECT_EQ(own_protocol_socket("unix:///run/x.sock", "CORRAL_TEST_TRANSPORT"), "/run/x.sock");
  EXPECT_EQ(own_protocol_socket("unix:rel.sock", "CORRAL_TEST_TRANSPORT"), "rel.sock");
  EXPECT_EQ(own_protocol_socket("head:7777", "CORRAL_TEST_TRANSPORT"), std::nullopt);
  EXPECT_EQ(own_protocol_socket("ipv4:10.0.0.1:7777", "CORRAL_TEST_TRANSPORT"), std::nullopt);
  ::setenv("CORRAL_TEST_TRANSPORT", "grpc", 1);
  EXPECT_EQ(own_protocol_socket("unix:/run/x.sock", "CORRAL_TEST_TRANSPORT"), std::nullopt);
  ::setenv("CORRAL_TEST_TRANSPORT", "socket", 1);
  EXPECT_EQ(own_protocol_socket("unix:/run/x.sock", "CORRAL_TEST_TRANSPORT"), "/run/x.sock");
  ::unsetenv("CORRAL_TEST_TRANSPORT");
}

}  // namespace
}  // namespace corral::net
