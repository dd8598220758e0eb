// controller.listen and controller.munge-socket: TCP addresses are checked when the
// configuration is read, each bad one refused with the key and the value named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctld/config.h"

namespace corral::ctld {
namespace {

Result<Config> with(std::vector<std::string> sets) { return load_config("", sets); }

TEST(ListenConfig, NoneByDefault) {
  auto c = with({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_TRUE(c->listen.empty());
  EXPECT_TRUE(c->munge_socket.empty());
  EXPECT_EQ(c->auth, net::AuthMethod::munge);
}

TEST(ListenConfig, AuthIsMungeOrTheClusterKey) {
  auto c = with({R"(controller.auth="cluster-key")"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->auth, net::AuthMethod::cluster_key);
  for (const char* bad : {R"("kerberos")", R"("")", "1", R"(["munge"])"}) {
    auto refused = with({std::string("controller.auth=") + bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.message().find("controller.auth"), std::string::npos) << refused.message();
  }
}

TEST(ListenConfig, AcceptsHostPortLists) {
  auto c = with({R"(controller.listen=["0.0.0.0:6817", "[::]:6818"])", R"(controller.munge-socket="/run/m.sock")"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->listen, (std::vector<std::string>{"0.0.0.0:6817", "[::]:6818"}));
  EXPECT_EQ(c->munge_socket, "/run/m.sock");
}

TEST(ListenConfig, RefusesWhatIsNotHostPort) {
  for (const char* bad : {R"(["0.0.0.0"])", R"([":6817"])", R"(["host:0"])", R"(["host:65536"])", R"(["host:68x"])",
                          R"(["host:99999999999999999999"])", R"("0.0.0.0:6817")", "[1]"}) {
    auto c = with({std::string("controller.listen=") + bad});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.message().find("listen"), std::string::npos) << c.message();
  }
}

}  // namespace
}  // namespace corral::ctld
