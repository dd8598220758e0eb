// The wire client inside libpmi.so and libpmi2.so (src/node/pmi_client): reply parsing, the
// environment, the process mapping read back exactly as the agent's server writes it,
// and the encoding that lets values the wire cannot carry through. The libraries
// themselves run under real steps in tests/integration/test_pmi_libs.py.
#include "node/pmi_client/pmi_wire_client.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "node/pmi/pmi_server.h"

namespace corral::pmi_client {
namespace {

TEST(PmiClientWire, ParsesRepliesOfBothVersions) {
  auto v1 = parse_v1("cmd=get_result rc=0 value=a=b\n");
  ASSERT_EQ(v1.size(), 3u);
  EXPECT_EQ(*field(v1, "value"), "a=b");
  EXPECT_EQ(int_field(v1, "rc", -1), 0);
  EXPECT_EQ(int_field(v1, "missing", 7), 7);
  EXPECT_EQ(*field(parse_v1("cmd=abort message=two words"), "message"), "two words");
  auto v2 = parse_v2("cmd=kvs-get-response;rc=0;found=TRUE;value=x y;");
  EXPECT_EQ(*field(v2, "value"), "x y");
  EXPECT_EQ(*field(v2, "found"), "TRUE");
  EXPECT_EQ(int_field(parse_v2("cmd=x;rc=nope;"), "rc", -1), -1);
  EXPECT_EQ(WireClient::frame_v2("cmd=finalize;"), "    13cmd=finalize;");
}

// Every layout the agent's server can describe comes back rank for rank.
TEST(PmiClientWire, ProcessMappingReadsBackWhatTheServerWrote) {
  std::mt19937 rng(7);
  std::vector<std::vector<int>> layouts = {{0, 0, 0, 0}, {0, 0, 1, 1}, {0, 1, 0, 1}, {0, 1, 2, 0, 1, 2, 0},
                                           {0, 0, 0, 1, 2, 2}, {3, 3, 0, 0}};
  for (int i = 0; i < 200; ++i) {
    std::vector<int> layout(1 + rng() % 40);
    for (auto& n : layout) n = static_cast<int>(rng() % 5);
    layouts.push_back(layout);
  }
  for (const auto& layout : layouts) {
    std::string mapping = node::pmi_process_mapping(layout);
    if (mapping.empty()) continue;  // too long for a value: the server sends none
    EXPECT_EQ(expand_process_mapping(mapping, static_cast<int>(layout.size())), layout) << mapping;
  }
}

TEST(PmiClientWire, BrokenMappingsAreUnknownLayouts) {
  for (const char* bad : {"", "(vector)", "(vector,(0,1))", "(vector,(0,0,2))", "(vector,(a,1,2))", "vector,(0,1,2)",
                          "(vector,(0,1,2)", "(vector,(-1,1,2))"})
    EXPECT_TRUE(expand_process_mapping(bad, 4).empty()) << bad;
  EXPECT_EQ(ranks_on_node_of({}, 3), std::vector<int>{3});
  EXPECT_EQ(ranks_on_node_of({0, 1, 0, 1}, 2), (std::vector<int>{0, 2}));
}

TEST(PmiClientWire, ValuesTheWireCannotCarryAreEncoded) {
  EXPECT_EQ(encode_value("plain=value", false), "plain=value");  // what wire clients see, unchanged
  EXPECT_EQ(encode_value("a b;c", true), "%corral:a b%3Bc");
  for (bool v2 : {false, true})
    for (std::string v : {std::string("AbC  "), std::string(" 100% sure "), std::string("%corral:x"),
                          std::string("tab\there;"), std::string("%zz%4"), std::string("")}) {
      std::string wire = encode_value(v, v2);
      EXPECT_EQ(decode_value(wire), v);
      EXPECT_EQ(wire.find(v2 ? ';' : ' '), std::string::npos) << wire;
    }
  EXPECT_EQ(decode_value("%corral:%4"), "%4");  // a broken escape stays as it is
}

TEST(PmiClientWire, WordsAndBuffers) {
  EXPECT_TRUE(wire_word("key-1", true));
  EXPECT_FALSE(wire_word("a=b", true));
  EXPECT_TRUE(wire_word("a=b", false));
  EXPECT_FALSE(wire_word("a b", false));
  EXPECT_FALSE(wire_word("", false));
  char buf[4];
  EXPECT_TRUE(copy_out("abc", buf, 4));
  EXPECT_STREQ(buf, "abc");
  EXPECT_FALSE(copy_out("abcd", buf, 4));
  EXPECT_FALSE(copy_out("a", nullptr, 4));
}

TEST(PmiClientWire, TaskEnvironment) {
  std::string error;
  ::unsetenv("PMI_FD");
  auto single = read_task_env(error);
  ASSERT_TRUE(single);
  EXPECT_EQ(single->fd, -1);
  EXPECT_EQ(single->size, 1);
  ::setenv("PMI_FD", "5", 1);
  ::setenv("PMI_RANK", "2", 1);
  ::setenv("PMI_SIZE", "2", 1);  // rank beyond the size
  EXPECT_FALSE(read_task_env(error));
  EXPECT_NE(error.find("PMI_RANK"), std::string::npos);
  ::setenv("PMI_SIZE", "3", 1);
  auto env = read_task_env(error);
  ASSERT_TRUE(env);
  EXPECT_EQ(env->fd, 5);
  EXPECT_EQ(env->rank, 2);
  ::setenv("PMI_FD", "x", 1);
  EXPECT_FALSE(read_task_env(error));
  for (const char* v : {"PMI_FD", "PMI_RANK", "PMI_SIZE"}) ::unsetenv(v);
}

// Replies that arrive in pieces, and a server that goes away.
TEST(PmiClientWire, CallsReadWholeRepliesAndNoticeAClosedSocket) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::thread server([fd = sv[1]] {
    char buf[256];
    (void)!::read(fd, buf, sizeof buf);
    (void)!::write(fd, "cmd=maxes rc=0 ", 15);
    (void)!::write(fd, "vallen_max=512\n", 15);
    (void)!::read(fd, buf, sizeof buf);
    (void)!::write(fd, "    23cmd=kvs-fence-response;", 29);
    (void)!::read(fd, buf, sizeof buf);
    ::close(fd);
  });
  WireClient client(sv[0]);
  auto maxes = client.call_v1("cmd=get_maxes\n");
  ASSERT_TRUE(maxes);
  EXPECT_EQ(int_field(*maxes, "vallen_max", 0), 512);
  auto fence = client.call_v2("cmd=kvs-fence;");
  ASSERT_TRUE(fence);
  EXPECT_EQ(*field(*fence, "cmd"), "kvs-fence-response");
  EXPECT_FALSE(client.call_v1("cmd=finalize\n"));
  server.join();
  ::close(sv[0]);
}

}  // namespace
}  // namespace corral::pmi_client
