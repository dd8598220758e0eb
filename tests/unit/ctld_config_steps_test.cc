// corrald's [steps] section and controller.key-file: defaults, and bad values refused with
// the key named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctld/config.h"

namespace corral::ctld {
namespace {

Result<Config> with(std::vector<std::string> sets) { return load_config("", sets); }

TEST(StepsConfig, Defaults) {
  auto c = with({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->steps.fanout_width, 32u);
  EXPECT_EQ(c->steps.mpi_ports, "");
  EXPECT_EQ(c->steps.mpi_ports_per_job, 100u);
  EXPECT_EQ(c->steps.mpi_ports_per_step, 2u);
  EXPECT_EQ(c->key_file, "/var/lib/corral/cluster.key");
}

TEST(StepsConfig, KeyFileFollowsTheStateDirectoryUnlessSet) {
  auto c = with({"controller.state-dir=/srv/corral"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->key_file, "/srv/corral/cluster.key");
  c = with({"controller.state-dir=/srv/corral", "controller.key-file=/etc/corral/key"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->key_file, "/etc/corral/key");
}

TEST(StepsConfig, AcceptsGoodValues) {
  auto c = with({"steps.fanout-width=2", "steps.mpi-ports=12000-12999", "steps.mpi-ports-per-job=50",
                 "steps.mpi-ports-per-step=5"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->steps.fanout_width, 2u);
  EXPECT_EQ(c->steps.mpi_ports, "12000-12999");
  EXPECT_EQ(c->steps.mpi_ports_per_job, 50u);
  EXPECT_EQ(c->steps.mpi_ports_per_step, 5u);
  auto single = with({"steps.mpi-ports=12000", "steps.mpi-ports-per-job=1", "steps.mpi-ports-per-step=1"});
  ASSERT_TRUE(single.ok()) << single.message();
  EXPECT_EQ(single->steps.mpi_ports, "12000");
}

TEST(StepsConfig, BadValuesNameTheKey) {
  struct Case {
    std::vector<std::string> sets;
    std::string expect;
  };
  for (const auto& [sets, expect] : std::vector<Case>{
           {{"steps.fanout-width=1"}, "steps.fanout-width"},
           {{"steps.fanout-width=wide"}, "steps.fanout-width"},
           {{"steps.mpi-ports=80-90"}, "steps.mpi-ports"},
           {{"steps.mpi-ports=12999-12000"}, "steps.mpi-ports"},
           {{"steps.mpi-ports=ports"}, "steps.mpi-ports"},
           {{"steps.mpi-ports-per-job=0"}, "steps.mpi-ports-per-job"},
           {{"steps.mpi-ports-per-step=-1"}, "steps.mpi-ports-per-step"},
           {{"steps.mpi-ports-per-step=200"}, "steps.mpi-ports-per-step"},
           {{"steps.mpi-ports=12000-12009"}, "steps.mpi-ports-per-job"},  // 100 > 10 ports
           {{"steps.no-such-key=1"}, "steps.no-such-key"},
       }) {
    auto c = with(sets);
    ASSERT_FALSE(c.ok()) << sets.front() << " was accepted";
    EXPECT_NE(c.message().find(expect), std::string::npos) << sets.front() << ": " << c.message();
  }
}

}  // namespace
}  // namespace corral::ctld
