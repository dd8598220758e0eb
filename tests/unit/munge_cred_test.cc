// MUNGE credentials through real munged daemons (Debian's munge, started here with keys
// of their own): who encoded a credential, and every way one is refused. Skips where
// munged is not installed or this is not root.
#include "net/munge_cred.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "temp_dir.h"

namespace corral::net {
namespace {

namespace fs = std::filesystem;

// One munged with a key of its own, in a temporary directory.
class Munged {
 public:
  explicit Munged(char key_byte) {
    fs::permissions(dir_.path(), fs::perms::owner_all);
    std::ofstream(dir_.path() / "key") << std::string(1024, key_byte);
    fs::permissions(dir_.path() / "key", fs::perms::owner_read | fs::perms::owner_write);
    socket_ = (dir_.path() / "sock").string();
  }
  // munged has been seen to miss a SIGTERM that came while it was still starting: the
  // test must not hang on it.
  ~Munged() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool start() {
    const std::string d = dir_.str();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/usr/sbin/munged", "munged", "-F", "-f", ("--socket=" + socket_).c_str(),
              ("--key-file=" + d + "/key").c_str(), ("--log-file=" + d + "/log").c_str(),
              ("--pid-file=" + d + "/pid").c_str(), ("--seed-file=" + d + "/seed").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(socket_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return fs::exists(socket_);
  }
  const std::string& socket() const { return socket_; }
  const fs::path& dir() const { return dir_.path(); }

 private:
  test::TempDir dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

class MungeCredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || !fs::exists("/usr/sbin/munged")) GTEST_SKIP() << "needs root and munged";
    ASSERT_TRUE(site_.start());
  }
  Munged site_{'k'};
};

TEST_F(MungeCredTest, ACredentialNamesItsMakerOnce) {
  auto cred = munge_credentials(site_.socket())->encode(kRequestPayload);
  ASSERT_TRUE(cred) << cred.message();
  auto who = munge_credentials(site_.socket())->decode(*cred, kRequestPayload, nullptr);
  ASSERT_TRUE(who) << who.message();
  EXPECT_EQ(who->uid, ::geteuid());
  EXPECT_EQ(who->gid, ::getegid());
  auto again = munge_credentials(site_.socket())->decode(*cred, kRequestPayload, nullptr);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::permission_denied);
  EXPECT_NE(again.message().find("Replayed credential"), std::string::npos) << again.message();
}

TEST_F(MungeCredTest, ForeignForgedAndMisdirectedCredentialsAreRefused) {
  Munged other('x');  // another site's key
  ASSERT_TRUE(other.start());
  auto foreign = munge_credentials(other.socket())->encode(kRequestPayload);
  ASSERT_TRUE(foreign);
  auto a = munge_credentials(site_.socket())->decode(*foreign, kRequestPayload, nullptr);
  ASSERT_FALSE(a);
  EXPECT_NE(a.message().find("Invalid credential"), std::string::npos) << a.message();

  auto elsewhere = munge_credentials(site_.socket())->encode("something else");
  ASSERT_TRUE(elsewhere);
  auto b = munge_credentials(site_.socket())->decode(*elsewhere, kRequestPayload, nullptr);
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("not made for a corral request"), std::string::npos);

  for (std::string bad : {std::string(), std::string("MUNGE:AAAA:"), std::string(kMaxMungeCredential + 1, 'A')}) {
    auto c = munge_credentials(site_.socket())->decode(bad, kRequestPayload, nullptr);
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().code, Errc::permission_denied) << bad;
  }
}

// The controller's answer to an agent carries the connection's session key: only the
// agent's uid may decode it, so another user on the host who copies it learns nothing.
TEST_F(MungeCredTest, ARestrictedCredentialIsReadByItsUidAlone) {
  fs::permissions(site_.dir(), fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  const std::string secret(32, 's');
  auto cred = munge_credentials(site_.socket())->encode_for(std::string(kControllerPayload) + secret, 0);
  ASSERT_TRUE(cred) << cred.message();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::string out = "not refused";
    if (::setresgid(65534, 65534, 65534) == 0 && ::setresuid(65534, 65534, 65534) == 0) {
      std::string rest;
      auto other = munge_credentials(site_.socket())->decode(*cred, kControllerPayload, &rest);
      if (!other) out = other.message() + (rest.empty() ? "" : " (but the payload came back)");
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  char buf[512] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  const std::string other(buf, n > 0 ? static_cast<size_t>(n) : 0);
  EXPECT_NE(other.find("Unauthorized"), std::string::npos) << other;
  EXPECT_EQ(other.find("payload came back"), std::string::npos) << other;
  std::string rest;
  auto mine = munge_credentials(site_.socket())->decode(*cred, kControllerPayload, &rest);
  ASSERT_TRUE(mine) << mine.message();
  EXPECT_EQ(rest, secret);
  // The exact-payload decode refuses a payload with more after the prefix.
  auto more = munge_credentials(site_.socket())->encode(std::string(kRequestPayload) + "x");
  ASSERT_TRUE(more);
  EXPECT_FALSE(munge_credentials(site_.socket())->decode(*more, kRequestPayload, nullptr));
}

TEST_F(MungeCredTest, NoMungedIsUnavailableNotDenied) {
  auto cred = munge_credentials("/nonexistent/munge.socket")->encode(kRequestPayload);
  ASSERT_FALSE(cred);
  EXPECT_EQ(cred.error().code, Errc::unavailable);
  EXPECT_NE(cred.message().find("/nonexistent/munge.socket"), std::string::npos) << cred.message();
  auto real = munge_credentials(site_.socket())->encode(kRequestPayload);
  ASSERT_TRUE(real);
  auto check = munge_credentials("/nonexistent/munge.socket")->decode(*real, kRequestPayload, nullptr);
  ASSERT_FALSE(check);
  EXPECT_EQ(check.error().code, Errc::unavailable);
}

}  // namespace
}  // namespace corral::net
