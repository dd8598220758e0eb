#include "node/pmi/pmi_wire.h"

#include <gtest/gtest.h>

namespace corral::node::pmi {
namespace {

TEST(PmiWire, ParsesCommandAndArguments) {
  auto cmd = parse_line("cmd=put kvsname=kvs_1 key=-bcast-1-0 value=2F6465");
  ASSERT_TRUE(cmd.ok()) << cmd.message();
  EXPECT_EQ(cmd->name, "put");
  EXPECT_FALSE(cmd->multi_line);
  ASSERT_EQ(cmd->args.size(), 3u);
  EXPECT_EQ(*cmd->arg("kvsname"), "kvs_1");
  EXPECT_EQ(*cmd->arg("key"), "-bcast-1-0");
  EXPECT_EQ(*cmd->arg("value"), "2F6465");
  EXPECT_EQ(cmd->arg("missing"), nullptr);
}

TEST(PmiWire, CommandWithoutArguments) {
  auto cmd = parse_line("cmd=barrier_in");
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->name, "barrier_in");
  EXPECT_TRUE(cmd->args.empty());
}

TEST(PmiWire, ValueKeepsEqualsSigns) {
  // MPICH announces a segmented value as "value=segments=4".
  auto cmd = parse_line("cmd=put kvsname=k key=-allgather-shm-1-3 value=segments=4");
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(*cmd->arg("value"), "segments=4");
}

TEST(PmiWire, EmptyValueAndExtraSpaces) {
  auto cmd = parse_line("  cmd=put   key=k  value=  \r");
  ASSERT_TRUE(cmd.ok()) << cmd.message();
  EXPECT_EQ(*cmd->arg("value"), "");
  EXPECT_EQ(*cmd->arg("key"), "k");
}

TEST(PmiWire, WordsWithoutEqualsContinueTheValue) {
  auto cmd = parse_line("cmd=abort exitcode=3 message=it went very wrong");
  ASSERT_TRUE(cmd.ok()) << cmd.message();
  EXPECT_EQ(*cmd->arg("exitcode"), "3");
  EXPECT_EQ(*cmd->arg("message"), "it went very wrong");
}

TEST(PmiWire, MultiLineCommandIsMarked) {
  auto cmd = parse_line("mcmd=spawn");
  ASSERT_TRUE(cmd.ok());
  EXPECT_TRUE(cmd->multi_line);
  EXPECT_EQ(cmd->name, "spawn");
}

TEST(PmiWire, RejectsMalformedLines) {
  for (const char* line : {"", "   ", "put key=x", "cmd=", "cmd", "key=x cmd=put", "cmd=put =x", "cmd=put stray",
                           "cmd=put key=a key=b", "mcmd=", "cmd=put key=\x01"}) {
    auto cmd = parse_line(line);
    EXPECT_FALSE(cmd.ok()) << "accepted '" << line << "'";
    if (!cmd.ok()) {
      EXPECT_EQ(cmd.error().code, Errc::invalid_argument);
      EXPECT_NE(cmd.message().find("malformed PMI command"), std::string::npos) << cmd.message();
    }
  }
}

TEST(PmiWire, ErrorQuotesLongLinesShortly) {
  std::string line = "cmd=put " + std::string(500, 'x');
  auto cmd = parse_line(line);
  ASSERT_FALSE(cmd.ok());
  EXPECT_LT(cmd.message().size(), 200u);
  EXPECT_NE(cmd.message().find("..."), std::string::npos);
}

TEST(PmiWire, FormatsReplies) {
  EXPECT_EQ(format_reply("barrier_out"), "cmd=barrier_out\n");
  EXPECT_EQ(format_reply("get_result", {{"rc", "0"}, {"value", "a=b"}}), "cmd=get_result rc=0 value=a=b\n");
}

TEST(PmiWire, FormatKeepsRepliesOnOneLine) {
  std::string reply = format_reply("get_result", {{"rc", "-1"}, {"msg", "key 'x' not\nfound"}});
  EXPECT_EQ(reply, "cmd=get_result rc=-1 msg=key_'x'_not_found\n");
  auto back = parse_line(std::string_view(reply).substr(0, reply.size() - 1));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back->arg("msg"), "key_'x'_not_found");
}

TEST(PmiWire, RoundTrip) {
  std::string reply = format_reply("maxes", {{"kvsname_max", "256"}, {"keylen_max", "64"}, {"vallen_max", "1024"}});
  auto cmd = parse_line(std::string_view(reply).substr(0, reply.size() - 1));
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(cmd->name, "maxes");
  EXPECT_EQ(*cmd->arg("vallen_max"), "1024");
}

}  // namespace
}  // namespace corral::node::pmi
