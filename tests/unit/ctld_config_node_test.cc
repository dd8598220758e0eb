// [node]: settings corrald gives every agent whose command line leaves them unset, and
// [job] requeue / max-requeue.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctld/config.h"

namespace corral::ctld {
namespace {

Result<Config> with(std::vector<std::string> sets) { return load_config("", sets); }

TEST(NodeConfig, NothingUnlessSet) {
  auto c = with({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(c->node_job_pids_max.has_value());
  EXPECT_FALSE(c->node_cpu_bind.has_value());
  EXPECT_FALSE(c->requeue);
  EXPECT_EQ(c->max_requeue, 5u);
}

TEST(NodeConfig, ReadsItsKeys) {
  auto c = with({"node.job-pids-max=64", R"(node.cpu-bind="none")", "job.requeue=true", "job.max-requeue=2"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->node_job_pids_max, std::optional<uint64_t>(64));
  EXPECT_EQ(c->node_cpu_bind, std::optional<bool>(false));
  EXPECT_TRUE(c->requeue);
  EXPECT_EQ(c->max_requeue, 2u);
}

TEST(NodeConfig, RefusesBadValuesNamingTheKey) {
  for (const char* bad :
       {"node.job-pids-max=-1", R"(node.job-pids-max="64")", "node.job-pids-max=99999999", R"(node.cpu-bind="sockets")",
        "node.cpu-bind=1", "node.output-spool=1", "job.requeue=3", "job.max-requeue=-1"}) {
    auto c = with({bad});
    ASSERT_FALSE(c.ok()) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(c.message().find(key.substr(key.find('.') + 1)), std::string::npos) << c.message();
  }
}

}  // namespace
}  // namespace corral::ctld
