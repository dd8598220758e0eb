#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "fabric/slingshot/sim_cxi.h"
#include "fabric/slingshot/slingshot_env.h"
#include "temp_dir.h"

namespace ss = corral::fabric::slingshot;

namespace {

class SlingshotEnv : public ::testing::Test {
 protected:
  std::unique_ptr<ss::SimCxiDevice> open(uint32_t nics) {
    auto cfg = ss::default_sim_config();
    cfg.nics = nics;
    auto d = ss::SimCxiDevice::create(dir_, "n1", cfg);
    EXPECT_TRUE(d.ok()) << d.message();
    return std::move(*d);
  }

  static ss::ServiceDesc desc(uint32_t uid, std::vector<uint16_t> vnis) {
    ss::ServiceDesc d;
    d.member_uids = {uid};
    d.vnis = std::move(vnis);
    d.tcs = ss::kTcBestEffort | ss::kTcLowLatency;
    return d;
  }

  corral::test::TempDir tmp_{"corral-ss-env"};
  const std::string dir_ = tmp_.str();
};

}  // namespace

TEST(SlingshotEnvParse, VniList) {
  auto v = ss::parse_vni_list("1024,1025");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<uint16_t>{1024, 1025}));
  EXPECT_TRUE(ss::parse_vni_list("")->empty());
  EXPECT_EQ(ss::parse_vni_list("65535")->at(0), 65535);
  for (const char* bad : {"1024,", ",1024", "10x", "65536", "-1", "1024,,1025", " 1024", "1024,1024"})
    EXPECT_FALSE(ss::parse_vni_list(bad).ok()) << bad;
  EXPECT_EQ(ss::parse_vni_list("1024,abc").message(),
            "VNI list '1024,abc': 'abc' is not a VNI (an integer from 0 to 65535)");
  EXPECT_EQ(ss::format_vni_list({1024, 1025}), "1024,1025");
}

TEST(SlingshotEnvParse, TcsEncoding) {
  EXPECT_EQ(ss::format_tcs(ss::kTcBestEffort | ss::kTcLowLatency), "0x0a");
  EXPECT_EQ(ss::format_tcs(ss::kTcDedicatedAccess), "0x01");
  EXPECT_EQ(ss::format_tcs(0xf), "0x0f");
}

TEST_F(SlingshotEnv, SetsTheFourVariablesInNicOrder) {
  auto dev = open(3);
  // Make service ids differ per NIC: cxi1 gets an extra service first.
  ASSERT_TRUE(dev->alloc_service("cxi1", desc(2000, {2000})).ok());
  ASSERT_TRUE(dev->alloc_service("cxi2", desc(1000, {1024, 1025})).ok());
  ASSERT_TRUE(dev->alloc_service("cxi1", desc(1000, {1025, 1024})).ok());
  ASSERT_TRUE(dev->alloc_service("cxi0", desc(1000, {1024, 1025})).ok());
  std::map<std::string, std::string> env{{"PATH", "/bin"}};
  auto st = ss::apply_slingshot_env(*dev, {1024, 1025}, 1000, env);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(env["SLINGSHOT_VNIS"], "1024,1025");
  EXPECT_EQ(env["SLINGSHOT_DEVICES"], "cxi0,cxi1,cxi2");
  EXPECT_EQ(env["SLINGSHOT_SVC_IDS"], "2,3,2");
  EXPECT_EQ(env["SLINGSHOT_TCS"], "0x0a");
  EXPECT_EQ(env["PATH"], "/bin");
}

TEST_F(SlingshotEnv, SkipsNicsWithoutTheJobsService) {
  auto dev = open(2);
  ASSERT_TRUE(dev->alloc_service("cxi1", desc(1000, {1024})).ok());
  ASSERT_TRUE(dev->alloc_service("cxi0", desc(1001, {1024})).ok());  // another user's
  std::map<std::string, std::string> env;
  ASSERT_TRUE(ss::apply_slingshot_env(*dev, {1024}, 1000, env).ok());
  EXPECT_EQ(env["SLINGSHOT_DEVICES"], "cxi1");
  EXPECT_EQ(env["SLINGSHOT_SVC_IDS"], "2");
}

TEST_F(SlingshotEnv, NoServiceAnywhereIsAnError) {
  auto dev = open(1);
  std::map<std::string, std::string> env;
  auto st = ss::apply_slingshot_env(*dev, {1024}, 1000, env);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "no CXI service for VNIs 1024 and uid 1000 on cxi0 (did the slingshot prolog run?)");
}

TEST_F(SlingshotEnv, EmptyVnisClearTheVariables) {
  auto dev = open(1);
  std::map<std::string, std::string> env{{"SLINGSHOT_VNIS", "9"},
                                         {"SLINGSHOT_DEVICES", "cxi0"},
                                         {"SLINGSHOT_SVC_IDS", "4"},
                                         {"SLINGSHOT_TCS", "0x0f"},
                                         {"HOME", "/root"}};
  ASSERT_TRUE(ss::apply_slingshot_env(*dev, {}, 1000, env).ok());
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"HOME", "/root"}}));
}

TEST(SlingshotEnvNoNics, ANodeWithoutNicsClearsTheVariables) {
  auto dev = ss::open_cxi_device("none", "n1");
  ASSERT_TRUE(dev.ok());
  std::map<std::string, std::string> env{{"SLINGSHOT_VNIS", "9"}};
  ASSERT_TRUE(ss::apply_slingshot_env(**dev, {1024}, 1000, env).ok());
  EXPECT_TRUE(env.empty());
}
