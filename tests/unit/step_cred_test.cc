#include "job/step_cred.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "job/hmac_key.h"

namespace corral::job {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kIssued = 1'700'000'000.0;
const std::string kKey = "0123456789abcdef0123456789abcdef";
const std::string kOtherKey = "fedcba9876543210fedcba9876543210";

StepCred sample_cred() {
  StepCred c;
  c.jobid = 4242;
  c.stepid = 3;
  c.uid = 1000;
  c.gid = 100;
  c.nodes = "n[1-4]";
  for (const char* n : {"n1", "n2", "n3"}) c.cores[n] = IdSet::range(0, 7);
  c.cores["n4"] = IdSet::range(0, 3);
  c.issued = kIssued;
  c.expires = kIssued + 3600;
  c.nonce = 0x0123456789abcdefULL;
  return c;
}

VerifyPolicy policy_for(const StepCred& c, std::string node = "n2") {
  VerifyPolicy p;
  p.now = c.issued + 10;
  p.uid = c.uid;
  p.node = std::move(node);
  return p;
}

// Splits a token into its decoded payload and its signature text.
std::pair<std::string, std::string> open_token(const std::string& token) {
  auto dot = token.find('.');
  auto payload = base64url_decode(token.substr(0, dot));
  EXPECT_TRUE(payload.ok()) << payload.message();
  return {payload.ok() ? *payload : "", token.substr(dot + 1)};
}

std::string reseal(const std::string& payload, const std::string& mac_text) {
  return base64url_encode(payload) + "." + mac_text;
}

void expect_denied(const Result<StepCred>& r, std::string_view text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::permission_denied) << r.message();
  EXPECT_THAT(r.message(), HasSubstr(std::string(text)));
}

void expect_malformed(const Result<StepCred>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument) << r.message();
  EXPECT_THAT(r.message(), StartsWith("malformed step credential: "));
}

// ---- signing and verifying ----

TEST(StepCredTest, RoundTrip) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  auto back = verify_step_cred(token, kKey, policy_for(c));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(back->cores_on("n4").encode(), "0-3");
  EXPECT_TRUE(back->cores_on("n9").empty());
}

TEST(StepCredTest, TokenIsUrlSafeAndCoresAreGroupedByHostlist) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  EXPECT_EQ(token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789-_."),
            std::string::npos);
  auto j = nlohmann::json::parse(open_token(token).first);
  EXPECT_EQ(j["cores"], nlohmann::json::parse(R"([["n4","0-3"],["n[1-3]","0-7"]])"));
}

TEST(StepCredTest, NoncesMakeTokensDistinct) {
  StepCred a = sample_cred();
  StepCred b = a;
  b.nonce = a.nonce + 1;
  EXPECT_NE(sign_step_cred(a, kKey), sign_step_cred(b, kKey));
  auto n1 = random_nonce();
  auto n2 = random_nonce();
  ASSERT_TRUE(n1.ok() && n2.ok());
  EXPECT_NE(*n1, *n2);
}

TEST(StepCredTest, ForgedWithAnotherKeyIsRefused) {
  StepCred c = sample_cred();
  auto r = verify_step_cred(sign_step_cred(c, kOtherKey), kKey, policy_for(c));
  expect_denied(r, "step credential signature does not match (forged or altered)");
}

TEST(StepCredTest, PayloadByteFlippedIsRefused) {
  StepCred c = sample_cred();
  auto [payload, mac] = open_token(sign_step_cred(c, kKey));
  for (size_t i = 0; i < payload.size(); ++i) {
    std::string altered = payload;
    altered[i] = static_cast<char>(altered[i] ^ 0x01);
    auto r = verify_step_cred(reseal(altered, mac), kKey, policy_for(c));
    expect_denied(r, "forged or altered");
  }
}

TEST(StepCredTest, FieldChangedAndReserialisedWithoutResigningIsRefused) {
  StepCred c = sample_cred();
  auto [payload, mac] = open_token(sign_step_cred(c, kKey));
  auto j = nlohmann::json::parse(payload);
  j["uid"] = 0;  // the classic: become root
  auto r = verify_step_cred(reseal(j.dump(), mac), kKey, policy_for(c));
  expect_denied(r, "forged or altered");

  j = nlohmann::json::parse(payload);
  j["exp"] = c.expires + 86400;
  VerifyPolicy later = policy_for(c);
  later.now = c.expires + 60;
  expect_denied(verify_step_cred(reseal(j.dump(), mac), kKey, later), "forged or altered");
}

TEST(StepCredTest, SignatureAlteredIsRefused) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  auto dot = token.find('.');
  token[dot + 1] = token[dot + 1] == 'A' ? 'B' : 'A';
  expect_denied(verify_step_cred(token, kKey, policy_for(c)), "forged or altered");
}

TEST(StepCredTest, EveryTruncationIsRefused) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  for (size_t len = 0; len < token.size(); ++len) {
    auto r = verify_step_cred(token.substr(0, len), kKey, policy_for(c));
    ASSERT_FALSE(r.ok()) << "prefix of length " << len << " was accepted";
    EXPECT_TRUE(r.error().code == Errc::invalid_argument || r.error().code == Errc::permission_denied) << r.message();
  }
  expect_malformed(verify_step_cred(token.substr(0, token.size() - 1), kKey, policy_for(c)));
}

TEST(StepCredTest, GarbageTokensAreMalformed) {
  StepCred c = sample_cred();
  for (const char* t : {"", ".", "abc", "a.b.c", "!!!.###", "eyJ9.", "Zm9v.Zm9v", "Zm9v.===="}) {
    SCOPED_TRACE(t);
    expect_malformed(verify_step_cred(t, kKey, policy_for(c)));
  }
  auto r = verify_step_cred("abc", kKey, policy_for(c));
  EXPECT_THAT(r.message(), HasSubstr("no '.'"));
}

TEST(StepCredTest, CorrectlySignedButIncompletePayloadIsMalformed) {
  // A signer bug rather than an attack, but it must still be refused with a clear reason.
  std::string payload_b64 = base64url_encode(R"({"v":1,"job":1})");
  std::string mac_input = std::string("corral step credential v1\n") + payload_b64;
  std::string token = payload_b64 + "." + base64url_encode(hmac_sha256(kKey, mac_input));
  auto r = verify_step_cred(token, kKey, policy_for(sample_cred()));
  expect_malformed(r);
  EXPECT_THAT(r.message(), HasSubstr("field 'step' is missing"));
}

TEST(StepCredTest, CoresForNodeOutsideNodesIsMalformed) {
  StepCred c = sample_cred();
  c.cores["n9"] = IdSet::range(0, 1);
  auto r = verify_step_cred(sign_step_cred(c, kKey), kKey, policy_for(c));
  expect_malformed(r);
  EXPECT_THAT(r.message(), HasSubstr("node n9, which is not in nodes n[1-4]"));
}

TEST(StepCredTest, ExpiredIsRefused) {
  StepCred c = sample_cred();
  VerifyPolicy p = policy_for(c);
  p.now = c.expires + 12;
  auto r = verify_step_cred(sign_step_cred(c, kKey), kKey, p);
  expect_denied(r, "step credential expired 12 s ago");
}

TEST(StepCredTest, ExpiredWithinClockSkewIsAccepted) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  VerifyPolicy p = policy_for(c);
  p.now = c.expires + 3;
  p.clock_skew = 5;
  EXPECT_TRUE(verify_step_cred(token, kKey, p).ok());
  p.clock_skew = 0;
  expect_denied(verify_step_cred(token, kKey, p), "step credential expired 3.0 s ago");
}

TEST(StepCredTest, IssuedInTheFutureIsRefusedBeyondSkew) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  VerifyPolicy p = policy_for(c);
  p.now = c.issued - 3;
  EXPECT_TRUE(verify_step_cred(token, kKey, p).ok());
  p.now = c.issued - 30;
  expect_denied(verify_step_cred(token, kKey, p), "issued 30 s in the future");
}

TEST(StepCredTest, OtherUserIsRefused) {
  StepCred c = sample_cred();
  VerifyPolicy p = policy_for(c);
  p.uid = 1001;
  expect_denied(verify_step_cred(sign_step_cred(c, kKey), kKey, p), "step credential is for uid 1000, not 1001");
}

TEST(StepCredTest, NodeNotIncludedIsRefused) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  expect_denied(verify_step_cred(token, kKey, policy_for(c, "n5")), "step credential does not include node n5");
  EXPECT_TRUE(verify_step_cred(token, kKey, policy_for(c, "n4")).ok());
}

TEST(StepCredTest, OtherJobOrStepIsRefusedWhenPolicyNamesThem) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, kKey);
  VerifyPolicy p = policy_for(c);
  p.jobid = 4242;
  p.stepid = 3;
  EXPECT_TRUE(verify_step_cred(token, kKey, p).ok());
  p.stepid = 4;
  expect_denied(verify_step_cred(token, kKey, p), "is for step 4242.3, not step 4242.4");
  p.stepid.reset();
  p.jobid = 7;
  expect_denied(verify_step_cred(token, kKey, p), "is for job 4242, not job 7");
}

TEST(StepCredTest, EmptyKeyIsRefused) {
  StepCred c = sample_cred();
  auto r = verify_step_cred(sign_step_cred(c, ""), "", policy_for(c));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_THAT(r.message(), HasSubstr("key is empty"));
}

// ---- per-job keys ----

TEST(StepCredTest, DerivedJobKeysDifferPerJobAndPerClusterKey) {
  std::string k1 = derive_job_key(kKey, 1);
  EXPECT_EQ(k1.size(), 32u);
  EXPECT_EQ(k1, derive_job_key(kKey, 1));
  EXPECT_NE(k1, derive_job_key(kKey, 2));
  EXPECT_NE(k1, derive_job_key(kOtherKey, 1));
  EXPECT_NE(derive_job_key(kKey, 12), derive_job_key(kKey, 1));
}

TEST(StepCredTest, JobKeySignedCredVerifiesWithJobKeyOrClusterKey) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, derive_job_key(kKey, c.jobid));
  auto by_job_key = verify_step_cred(token, derive_job_key(kKey, c.jobid), policy_for(c));
  ASSERT_TRUE(by_job_key.ok()) << by_job_key.message();
  auto by_cluster = verify_step_cred_with_cluster_key(token, kKey, policy_for(c));
  ASSERT_TRUE(by_cluster.ok()) << by_cluster.message();
  EXPECT_EQ(*by_cluster, c);
  // Checks after the signature still apply on the cluster-key path.
  VerifyPolicy other = policy_for(c);
  other.uid = 1001;
  expect_denied(verify_step_cred_with_cluster_key(token, kKey, other), "not 1001");
}

TEST(StepCredTest, OneJobsKeyCannotSignForAnotherJob) {
  StepCred c = sample_cred();
  std::string job_key = derive_job_key(kKey, c.jobid);
  StepCred theft = c;
  theft.jobid = c.jobid + 1;
  auto r = verify_step_cred_with_cluster_key(sign_step_cred(theft, job_key), kKey, policy_for(c));
  expect_denied(r, "forged or altered");
}

TEST(StepCredTest, JobIdChangedInJobKeySignedTokenIsRefusedByClusterKeyCheck) {
  StepCred c = sample_cred();
  auto [payload, mac] = open_token(sign_step_cred(c, derive_job_key(kKey, c.jobid)));
  auto j = nlohmann::json::parse(payload);
  j["job"] = c.jobid + 1;
  expect_denied(verify_step_cred_with_cluster_key(reseal(j.dump(), mac), kKey, policy_for(c)), "forged or altered");
}

TEST(StepCredTest, ForgedTokenIsRefusedByClusterKeyCheck) {
  StepCred c = sample_cred();
  std::string token = sign_step_cred(c, derive_job_key(kOtherKey, c.jobid));
  expect_denied(verify_step_cred_with_cluster_key(token, kKey, policy_for(c)), "forged or altered");
}

// ---- key material and encodings ----

TEST(HmacKeyTest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacKeyTest, EqualMacsComparesWholeValue) {
  EXPECT_TRUE(equal_macs("abcd", "abcd"));
  EXPECT_FALSE(equal_macs("abcd", "abce"));
  EXPECT_FALSE(equal_macs("abcd", "abc"));
  EXPECT_FALSE(equal_macs("", ""));
}

TEST(HmacKeyTest, Base64urlMatchesRfc4648Vectors) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
}

TEST(HmacKeyTest, Base64urlRoundTripsEveryLength) {
  auto bytes = random_bytes(40);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  for (size_t n = 0; n <= bytes->size(); ++n) {
    std::string s = bytes->substr(0, n);
    auto back = base64url_decode(base64url_encode(s));
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, s);
  }
}

TEST(HmacKeyTest, Base64urlDecodeIsStrict) {
  EXPECT_FALSE(base64url_decode("Zg==").ok());  // padding
  EXPECT_FALSE(base64url_decode("+/8").ok());   // standard alphabet
  EXPECT_FALSE(base64url_decode("Z").ok());     // impossible length
  EXPECT_FALSE(base64url_decode("Zh").ok());    // non-canonical trailing bits
  EXPECT_THAT(base64url_decode("ab*d").message(), HasSubstr("'*' at position 2"));
}

TEST(HmacKeyTest, HexRoundTripAndErrors) {
  EXPECT_EQ(to_hex(std::string("\x00\xff\x10", 3)), "00ff10");
  auto back = from_hex("00FF10");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, std::string("\x00\xff\x10", 3));
  EXPECT_THAT(from_hex("abc").message(), HasSubstr("odd number"));
  EXPECT_THAT(from_hex("0g").message(), HasSubstr("'g' at position 1"));
}

TEST(HmacKeyTest, GeneratedKeysAreRandom) {
  auto a = generate_key();
  auto b = generate_key();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kKeyBytes);
  EXPECT_NE(*a, *b);
}

// ---- cluster key files ----

class KeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "stepcred.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (dir_ / "cluster.key").string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void write_text(const std::string& text, mode_t mode) {
    std::ofstream(path_) << text;
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(KeyFileTest, WrittenKeyLoadsBack) {
  auto key = generate_key();
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(write_key_file(path_, *key).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = load_key_file(path_);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, *key);
}

TEST_F(KeyFileTest, WriteRefusesToReplaceAnExistingKey) {
  ASSERT_TRUE(write_key_file(path_, kKey).ok());
  auto s = write_key_file(path_, kOtherKey);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::already_exists);
}

TEST_F(KeyFileTest, GroupOrOtherReadableKeyFileIsRefused) {
  for (mode_t mode : {0640, 0604, 0660, 0602}) {
    SCOPED_TRACE(mode);
    write_text(to_hex(kKey), mode);
    auto r = load_key_file(path_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::permission_denied);
    EXPECT_THAT(r.message(), HasSubstr(path_));
    char expected[8];
    std::snprintf(expected, sizeof expected, "%04o", static_cast<unsigned>(mode));
    EXPECT_THAT(r.message(), HasSubstr(std::string("mode ") + expected));
  }
  write_text(to_hex(kKey) + "\n", 0400);
  EXPECT_TRUE(load_key_file(path_).ok());
}

TEST_F(KeyFileTest, KeyFileOwnedBySomeoneElseIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  write_text(to_hex(kKey), 0600);
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  auto r = load_key_file(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.message(), HasSubstr("owned by uid 65534"));
}

TEST_F(KeyFileTest, MissingShortOrNonHexKeyFilesAreRefused) {
  auto missing = load_key_file(path_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_THAT(missing.message(), HasSubstr(path_));

  write_text("00112233", 0600);
  EXPECT_THAT(load_key_file(path_).message(), HasSubstr("4-byte key; at least 16 bytes"));

  write_text("not a hex key at all, clearly!!!", 0600);
  auto bad = load_key_file(path_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
  EXPECT_THAT(bad.message(), HasSubstr("does not hold a hex key"));
}

}  // namespace
}  // namespace corral::job
