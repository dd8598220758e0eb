#include "job/key_wrap.h"

#include <gtest/gtest.h>

#include "job/hmac_key.h"
#include "node/steps/job_keys.h"

namespace corral {
namespace {

TEST(KeyWrap, RoundTripsAndRefusesAnotherKekOrAChange) {
  const std::string kek(32, 'k'), key(32, 'j');
  auto wrapped = job::wrap_key(kek, key);
  ASSERT_TRUE(wrapped) << wrapped.message();
  EXPECT_EQ(wrapped->size(), 40u);
  EXPECT_EQ(wrapped->find(key), std::string::npos);
  auto back = job::unwrap_key(kek, *wrapped);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, key);
  auto other = job::unwrap_key(std::string(32, 'x'), *wrapped);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, Errc::permission_denied);
  std::string altered = *wrapped;
  altered[5] ^= 1;
  EXPECT_FALSE(job::unwrap_key(kek, altered));
  EXPECT_FALSE(job::unwrap_key(kek, wrapped->substr(0, 20)));
  EXPECT_FALSE(job::wrap_key("short", key));
  EXPECT_FALSE(job::wrap_key(kek, "7 bytes"));
}

TEST(JobKeys, KeepsUnwrappedKeysPerJobAndRefusesForeignOnes) {
  node::JobKeys keys;
  const std::string session(32, 's'), key(32, 'j');
  v1::JobKey k;
  k.set_jobid(7);
  k.set_wrapped_key(*job::wrap_key(session, key));
  auto none = keys.add(k);  // no session key yet
  ASSERT_FALSE(none);
  keys.set_session_key(session);
  ASSERT_TRUE(keys.add(k));
  ASSERT_NE(keys.find(7), nullptr);
  EXPECT_EQ(*keys.find(7), key);
  EXPECT_EQ(keys.find(8), nullptr);
  k.set_jobid(8);
  k.set_wrapped_key(*job::wrap_key(std::string(32, 'o'), key));  // another connection's
  auto foreign = keys.add(k);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.message().find("job 8"), std::string::npos) << foreign.message();
  keys.drop(7);
  EXPECT_EQ(keys.find(7), nullptr);
}

TEST(JobKeys, AreBounded) {
  node::JobKeys keys;
  const std::string session(32, 's');
  keys.set_session_key(session);
  const std::string wrapped = *job::wrap_key(session, std::string(32, 'j'));
  for (uint64_t id = 1; id <= node::JobKeys::kMaxKeys + 10; ++id) {
    v1::JobKey k;
    k.set_jobid(id);
    k.set_wrapped_key(wrapped);
    ASSERT_TRUE(keys.add(k));
  }
  EXPECT_EQ(keys.size(), node::JobKeys::kMaxKeys);
  EXPECT_EQ(keys.find(1), nullptr);  // the oldest went
  EXPECT_NE(keys.find(node::JobKeys::kMaxKeys + 10), nullptr);
}

}  // namespace
}  // namespace corral
