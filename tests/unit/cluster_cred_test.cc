// Cluster-key credentials (net/cluster_cred.h, net/cluster_key_auth.h): what a credential
// says, and every way one is refused: another key, a changed byte, expired, from the future,
// replayed, for another uid, for another purpose.
#include "net/cluster_cred.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "job/hmac_key.h"
#include "net/cluster_key_auth.h"
#include "net/replay_cache.h"

namespace corral::net {
namespace {

const std::string kKey(32, 'k');
constexpr int64_t kNow = 1'800'000'000;

ClusterCred alice(std::string payload = "corral-request-v1") {
  ClusterCred c;
  c.uid = 1001;
  c.gid = 1002;
  c.origin = "10.66.0.12";
  c.payload = std::move(payload);
  return c;
}

TEST(ClusterCred, SaysWhoMadeItWhereAndWhen) {
  auto text = seal_cluster_cred(kKey, alice(), kNow);
  ASSERT_TRUE(text) << text.message();
  EXPECT_EQ(text->rfind("corral1.", 0), 0u);
  EXPECT_EQ(text->find("corral-request"), std::string::npos) << "the payload travels encrypted";
  auto c = open_cluster_cred(kKey, *text, kNow + 10);
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->uid, 1001u);
  EXPECT_EQ(c->gid, 1002u);
  EXPECT_EQ(c->origin, "10.66.0.12");
  EXPECT_EQ(c->issued, kNow);
  EXPECT_EQ(c->payload, "corral-request-v1");
  EXPECT_FALSE(c->restrict_uid);
  EXPECT_EQ(c->nonce.size(), kClusterCredNonceBytes);
}

TEST(ClusterCred, TwoCredentialsForTheSameRequestDiffer) {
  auto a = seal_cluster_cred(kKey, alice(), kNow);
  auto b = seal_cluster_cred(kKey, alice(), kNow);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
}

TEST(ClusterCred, AnotherKeyOrAChangedByteIsRefused) {
  auto text = seal_cluster_cred(kKey, alice(), kNow);
  ASSERT_TRUE(text);
  auto other = open_cluster_cred(std::string(32, 'x'), *text, kNow);
  ASSERT_FALSE(other);
  EXPECT_NE(other.message().find("bad signature"), std::string::npos) << other.message();
  // Every position of the encoded body, changed to another base64url character.
  for (size_t i = kClusterCredPrefix.size(); i < text->size(); ++i) {
    std::string bent = *text;
    bent[i] = bent[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(open_cluster_cred(kKey, bent, kNow)) << "accepted with byte " << i << " changed";
  }
  EXPECT_FALSE(open_cluster_cred(kKey, text->substr(0, text->size() - 4), kNow));
  EXPECT_FALSE(open_cluster_cred(kKey, "corral1.", kNow));
  EXPECT_FALSE(open_cluster_cred(kKey, "MUNGE:AwQ...", kNow));
  EXPECT_FALSE(open_cluster_cred(kKey, std::string(100000, 'A'), kNow));
}

TEST(ClusterCred, LivesItsTimeToLiveAndNoLonger) {
  auto text = seal_cluster_cred(kKey, alice(), kNow);
  ASSERT_TRUE(text);
  EXPECT_TRUE(open_cluster_cred(kKey, *text, kNow + kClusterCredTtl));
  auto late = open_cluster_cred(kKey, *text, kNow + kClusterCredTtl + 1);
  ASSERT_FALSE(late);
  EXPECT_NE(late.message().find("expired"), std::string::npos) << late.message();
  EXPECT_TRUE(open_cluster_cred(kKey, *text, kNow - kClusterCredClockSkew));
  auto early = open_cluster_cred(kKey, *text, kNow - kClusterCredClockSkew - 1);
  ASSERT_FALSE(early);
  EXPECT_NE(early.message().find("clocks"), std::string::npos) << early.message();
}

TEST(ClusterCred, CarriesAUidRestriction) {
  ClusterCred c = alice();
  c.restrict_uid = 0;
  auto text = seal_cluster_cred(kKey, c, kNow);
  ASSERT_TRUE(text);
  auto opened = open_cluster_cred(kKey, *text, kNow);
  ASSERT_TRUE(opened);
  ASSERT_TRUE(opened->restrict_uid);
  EXPECT_EQ(*opened->restrict_uid, 0u);
}

TEST(ClusterCred, APayloadIsBounded) {
  EXPECT_FALSE(seal_cluster_cred(kKey, alice(std::string(kMaxClusterCredPayload + 1, 'p')), kNow));
  auto most = seal_cluster_cred(kKey, alice(std::string(kMaxClusterCredPayload, 'p')), kNow);
  ASSERT_TRUE(most) << most.message();
  EXPECT_TRUE(open_cluster_cred(kKey, *most, kNow));
}

TEST(ReplayCache, TakesEachKeyOnceUntilItExpires) {
  const std::string a(16, 'a'), b(16, 'b');
  ReplayCache cache(4);
  EXPECT_TRUE(cache.remember(a, kNow + 300, kNow));
  auto again = cache.remember(a, kNow + 300, kNow + 1);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::permission_denied);
  EXPECT_FALSE(cache.remember(a, kNow + 300, kNow + 300)) << "still good at its expiry second";
  EXPECT_TRUE(cache.remember(b, kNow + 300, kNow + 301));
  EXPECT_EQ(cache.size(), 1u) << "a is forgotten once its credential can no longer be used";
  EXPECT_FALSE(cache.remember("short", kNow + 300, kNow));
}

TEST(ReplayCache, WhenFullItRefusesRatherThanForgets) {
  const std::string a(16, 'a'), b(16, 'b'), c(16, 'c');
  ReplayCache cache(2);
  EXPECT_TRUE(cache.remember(a, kNow + 300, kNow));
  EXPECT_TRUE(cache.remember(b, kNow + 300, kNow));
  auto full = cache.remember(c, kNow + 300, kNow);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, Errc::unavailable);
  EXPECT_FALSE(cache.remember(a, kNow + 300, kNow)) << "a full cache still catches replays";
  EXPECT_TRUE(cache.remember(c, kNow + 300, kNow + 301));
}

TEST(ClusterKeyCredentials, ADaemonSignsAsItselfAndChecksOnce) {
  auto creds = cluster_key_credentials_from_key(kKey);
  EXPECT_EQ(creds->name(), "cluster-key");
  auto text = creds->encode("corral-request-v1");
  ASSERT_TRUE(text) << text.message();
  auto id = creds->decode(*text, "corral-request-v1", nullptr);
  ASSERT_TRUE(id) << id.message();
  EXPECT_EQ(id->uid, static_cast<uint32_t>(::getuid()));
  EXPECT_EQ(id->gid, static_cast<uint32_t>(::getgid()));
  EXPECT_EQ(id->origin, this_host_origin());
  auto replay = creds->decode(*text, "corral-request-v1", nullptr);
  ASSERT_FALSE(replay);
  EXPECT_NE(replay.message().find("replay"), std::string::npos) << replay.message();
}

TEST(ClusterKeyCredentials, RefusesAnotherPurposeAnotherUidAndAnotherKey) {
  auto creds = cluster_key_credentials_from_key(kKey);
  auto other_purpose = creds->encode("someone-elses-v1");
  ASSERT_TRUE(other_purpose);
  EXPECT_FALSE(creds->decode(*other_purpose, "corral-request-v1", nullptr));

  auto for_me = creds->encode_for("corral-controller-v1secret", static_cast<uint32_t>(::getuid()));
  ASSERT_TRUE(for_me);
  std::string rest;
  auto id = creds->decode(*for_me, "corral-controller-v1", &rest);
  ASSERT_TRUE(id) << id.message();
  EXPECT_EQ(rest, "secret");

  auto for_other = creds->encode_for("corral-controller-v1secret", static_cast<uint32_t>(::getuid()) + 1);
  ASSERT_TRUE(for_other);
  auto refused = creds->decode(*for_other, "corral-controller-v1", &rest);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("for uid"), std::string::npos) << refused.message();

  auto stranger = cluster_key_credentials_from_key(std::string(32, 's'));
  auto foreign = stranger->encode("corral-request-v1");
  ASSERT_TRUE(foreign);
  EXPECT_FALSE(creds->decode(*foreign, "corral-request-v1", nullptr));
}

TEST(ClusterKeyCredentials, WithoutAKeyItAsksCorralAuthdAndSaysWhereWhenItIsDown) {
  auto creds = cluster_key_credentials("", "/nonexistent/authd.sock");
  ASSERT_TRUE(creds) << creds.message();
  auto text = (*creds)->encode("corral-request-v1");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code, Errc::unavailable);
  EXPECT_NE(text.message().find("/nonexistent/authd.sock"), std::string::npos) << text.message();
  EXPECT_NE(text.message().find("corral-authd"), std::string::npos) << text.message();
}

}  // namespace
}  // namespace corral::net
