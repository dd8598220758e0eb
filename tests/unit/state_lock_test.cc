// One agent per state directory.
#include "node/state_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "temp_dir.h"

namespace corral::node {
namespace {

TEST(StateLock, ASecondAgentOnTheSameDirectoryIsRefusedUntilTheFirstEnds) {
  test::TempDir dir("corral-statelock");
  auto first = lock_state_dir(dir.str());
  ASSERT_TRUE(first) << first.message();
  auto second = lock_state_dir(dir.str());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, Errc::already_exists);
  EXPECT_NE(second.message().find("state directory " + dir.str() + " is in use by corral-node pid " +
                                  std::to_string(::getpid())),
            std::string::npos)
      << second.message();
  first = Error{};  // the first agent ends: its descriptor closes
  EXPECT_TRUE(lock_state_dir(dir.str()));
}

TEST(StateLock, AMissingDirectoryIsAnError) {
  auto r = lock_state_dir("/nonexistent/corral/state");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("cannot open /nonexistent/corral/state/lock"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace corral::node
