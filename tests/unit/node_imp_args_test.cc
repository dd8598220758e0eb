#include <gtest/gtest.h>

#include "node/exec/imp_args.h"

namespace corral::node {
namespace {

TEST(NodeImpArgs, ParsesEverything) {
  ImpArgs a;
  auto err = parse_imp_args(
      {"--uid",    "1000", "--gid",    "100", "--cwd",       "/w", "--stdin", "/dev/null", "--stdout", "o",
       "--stderr", "e",    "--env-fd", "3",   "--status-fd", "4",  "--",      "echo",      "--uid",    "x"},
      a);
  ASSERT_FALSE(err) << *err;
  EXPECT_EQ(a.uid, 1000);
  EXPECT_EQ(a.gid, 100);
  EXPECT_EQ(a.cwd, "/w");
  EXPECT_EQ(a.stdin_path.value_or(""), "/dev/null");
  EXPECT_EQ(a.stdout_path.value_or(""), "o");
  EXPECT_EQ(a.stderr_path.value_or(""), "e");
  EXPECT_EQ(a.env_fd, 3);
  EXPECT_EQ(a.status_fd, 4);
  EXPECT_EQ(a.command, (std::vector<std::string>{"echo", "--uid", "x"}));
}

TEST(NodeImpArgs, NotesAndKeptDescriptors) {
  ImpArgs a;
  auto err =
      parse_imp_args({"--uid", "1", "--gid", "1", "--note-fd", "5", "--keep-fd", "7", "--keep-fd", "9", "--", "x"}, a);
  ASSERT_FALSE(err) << *err;
  EXPECT_EQ(a.note_fd, 5);
  EXPECT_EQ(a.keep_fds, (std::vector<int>{7, 9}));
  EXPECT_TRUE(parse_imp_args({"--uid", "1", "--gid", "1", "--keep-fd", "2", "--", "x"}, a).has_value());
  EXPECT_TRUE(parse_imp_args({"--uid", "1", "--gid", "1", "--note-fd", "x", "--", "x"}, a).has_value());
}

TEST(NodeImpArgs, OptionalStreamsStayUnset) {
  ImpArgs a;
  ASSERT_FALSE(parse_imp_args({"--uid", "0", "--gid", "0", "--", "true"}, a));
  EXPECT_FALSE(a.stdout_path);
  EXPECT_EQ(a.env_fd, -1);
}

TEST(NodeImpArgs, RejectsBadInput) {
  auto fails = [](std::vector<std::string> args) {
    ImpArgs a;
    return parse_imp_args(args, a).has_value();
  };
  EXPECT_TRUE(fails({"--gid", "0", "--", "true"}));              // no uid
  EXPECT_TRUE(fails({"--uid", "0", "--", "true"}));              // no gid
  EXPECT_TRUE(fails({"--uid", "0", "--gid", "0"}));              // no command
  EXPECT_TRUE(fails({"--uid", "0", "--gid", "0", "--"}));        // empty command
  EXPECT_TRUE(fails({"--uid", "-1", "--gid", "0", "--", "x"}));  // negative
  EXPECT_TRUE(fails({"--uid", "12a", "--gid", "0", "--", "x"}));
  EXPECT_TRUE(fails({"--uid", "99999999999", "--gid", "0", "--", "x"}));
  EXPECT_TRUE(fails({"--bogus", "1", "--uid", "0", "--gid", "0", "--", "x"}));
  EXPECT_TRUE(fails({"--uid", "0", "--gid"}));  // value missing
}

}  // namespace
}  // namespace corral::node
