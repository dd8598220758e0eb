// Partition membership through a subnet manager: the OpenSM partitions.conf corral writes
// and reads back, what the hook keeps of a job's members, the UFM emulator's checks of
// what it is sent, and the UFM client against the emulator over HTTP.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/ib_hook_members.h"
#include "fabric/infiniband/opensm_partitions.h"
#include "fabric/infiniband/subnet_manager.h"
#include "fabric/infiniband/ufm_subnet_manager.h"
#include "pkey_table.h"
#include "ufm_server.h"

namespace fs = std::filesystem;
using namespace corral::fabric::infiniband;
using corral::Status;
using nlohmann::json;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(OpenSmPartitions, RendersDefaultNamedAndJobKeysAndSplitsLongLists) {
  PkeyMembers m;
  for (int i = 0; i < 40; ++i) m[0x2001].insert(fmt::format("{:016x}", 0x100 + i));
  m[0x0100].insert("946dae03002ac100");
  m[0x0200];  // no members: no line
  std::string text = render_partitions("", {{0x0100, "storage/fast"}}, m);
  EXPECT_NE(text.find("Default=0x7fff, ipoib : ALL=full ;\n"), std::string::npos);
  EXPECT_NE(text.find("storage_fast=0x0100, ipoib, defmember=full : 0x946dae03002ac100 ;\n"), std::string::npos);
  EXPECT_EQ(text.find("0x0200"), std::string::npos);
  size_t lines = 0;
  for (size_t at = 0; (at = text.find("corral_2001=0x2001", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 2u);  // 40 GUIDs, 32 to a line
  for (const auto& line : {text.substr(0, text.find('\n'))}) EXPECT_LT(line.size(), 4096u);
  // The site's base replaces the default line, and corral's lines read back as written.
  std::string with_base = render_partitions("Default=0x7fff : ALL=limited, SELF=full ;", {}, m);
  EXPECT_EQ(with_base.find("ALL=full"), std::string::npos);
  PkeyMembers back = parse_corral_partitions(with_base);
  m.erase(0x0200);
  EXPECT_EQ(back, m);
}

TEST(OpenSmPartitions, WritesRereadsAndPicksUpAfterARestart) {
  fs::path dir = temp_dir("opensm");
  const std::string file = (dir / "partitions.conf").string(), marks = (dir / "reloads").string();
  {
    OpenSmPartitions sm(file, "echo x >> " + marks, "", {});
    ASSERT_TRUE(sm.join(0x2001, {"0000000000000001", "0000000000000002"}).ok());
    ASSERT_TRUE(sm.join(0x2001, {"0000000000000001"}).ok());  // nothing new: not rewritten
    EXPECT_EQ(read(marks), "x\n");
  }
  {
    OpenSmPartitions two(file, "", "", {{0x0100, "storage"}});
    ASSERT_TRUE(two.join(0x0100, {"0000000000000005"}).ok());
    ASSERT_TRUE(two.join(0x2003, {"0000000000000006"}).ok());
    EXPECT_NE(read(file).find("storage=0x0100"), std::string::npos) << read(file);
    EXPECT_NE(read(file).find("corral_2003=0x2003"), std::string::npos) << read(file);
    ASSERT_TRUE(two.leave(0x0100, {"0000000000000005"}, false).ok());
    ASSERT_TRUE(two.leave(0x2003, {}, true).ok());
  }
  OpenSmPartitions again(file, "", "", {});  // a restarted controller
  ASSERT_TRUE(again.leave(0x2001, {"0000000000000001"}, false).ok());
  EXPECT_NE(read(file).find("0x0000000000000002"), std::string::npos);
  EXPECT_EQ(read(file).find("0x0000000000000001"), std::string::npos);
  ASSERT_TRUE(again.leave(0x2001, {}, true).ok());
  EXPECT_EQ(read(file).find("corral_2001"), std::string::npos);
  {
    // The reload command gets no descriptor of the controller's beyond 0-2, even one
    // opened without O_CLOEXEC.
    const int leaky = ::open(file.c_str(), O_RDONLY);
    // (An inner shell: the outer one keeps a copy of stdout for its own redirection.)
    OpenSmPartitions fds(file, "sh -c 'ls /proc/$$/fd' > " + (dir / "fds").string(), "", {});
    ASSERT_TRUE(fds.join(0x2004, {"0000000000000007"}).ok());
    ::close(leaky);
    EXPECT_EQ(read(dir / "fds"), "0\n1\n2\n");
  }
  OpenSmPartitions failing(file, "exit 3", "", {});
  Status st = failing.join(0x2002, {"0000000000000003"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exited with 3"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

TEST(IbHookMembers, KeepsOnlyKeysAndGuidsFromNodesAndState) {
  PkeyMembers m;
  members_from_output(
      "warning: x\nconfig: {\"interfaces\":[{\"pkey\":\"0x2001\",\"guid\":\"946dae03002ac101\"},"
      "{\"pkey\":\"0x7fff\",\"guid\":\"946dae03002ac100\"},{\"pkey\":\"0x2001\",\"guid\":\"../etc\"},"
      "{\"pkey\":\"nope\",\"guid\":\"946dae03002ac102\"}]}\n",
      m);
  EXPECT_EQ(m, (PkeyMembers{{0x2001, {"946dae03002ac101"}}}));
  json j = members_json(m);
  EXPECT_EQ(j.dump(), R"({"0x2001":["946dae03002ac101"]})");
  EXPECT_EQ(members_of_json(j), m);
  EXPECT_TRUE(members_of_json(json::parse(R"({"0x0":["946dae03002ac101"],"x":3})")).empty());
  members_from_output("config: not json", m);
  EXPECT_EQ(m.size(), 1u);
}

TEST(UfmEmulator, ChecksWhatItIsSentAsUfmDoes) {
  corral::emu::ufm::PkeyTable t;
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x7fff","guids":["0000000000000001"]})")).status, 400);
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x0","guids":["0000000000000001"]})")).status, 400);
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x12","guids":["xyz"]})")).status, 400);
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x12","guids":["0000000000000001"],"membership":"half"})")).status,
            400);
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x12","guids":[]})")).status, 400);
  EXPECT_EQ(t.add_guids(json::parse(R"([1,2])")).status, 400);
  EXPECT_EQ(t.add_guids(json::parse(R"({"pkey":"0x12","guids":["0x000000000000000A"]})")).status, 200);
  EXPECT_EQ(t.get("0x12", true).body["guids"][0]["guid"], "000000000000000a");
  EXPECT_EQ(t.get("0x13", true).body, json::object());
  EXPECT_EQ(t.remove_guids(json::parse(R"({"pkey":"0x13","guids":[]})")).status, 404);
  EXPECT_EQ(t.remove("0x12").status, 200);
  EXPECT_EQ(t.remove("0x12").status, 404);
}

TEST(UfmSubnetManager, JoinsLeavesAndReportsRefusals) {
  corral::emu::ufm::UfmConfig cfg;
  cfg.user = "u";
  cfg.password = "p";
  corral::emu::ufm::UfmServer server(cfg);
  const int port = server.bind("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.serve(); });
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  {  // the clients close their connections before the server stops
    UfmSubnetManager ufm(corral::http::HttpOptions{.base_url = url, .basic_auth = "u:p"});
    auto version = ufm.version();
    EXPECT_TRUE(version.ok()) << version.message();
    EXPECT_TRUE(ufm.join(0x2001, {"0000000000000001", "0000000000000002"}).ok());
    EXPECT_TRUE(ufm.leave(0x2001, {"0000000000000001"}, false).ok());
    EXPECT_TRUE(ufm.leave(0x2001, {}, true).ok());
    EXPECT_TRUE(ufm.leave(0x2001, {}, true).ok());  // already gone: done
    UfmSubnetManager wrong(corral::http::HttpOptions{.base_url = url, .basic_auth = "u:wrong"});
    Status st = wrong.join(0x2001, {"0000000000000001"});
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, corral::Errc::permission_denied);
    EXPECT_NE(st.message().find("HTTP 401"), std::string::npos) << st.message();
  }
  server.stop();
  serving.join();
  UfmSubnetManager gone(corral::http::HttpOptions{.base_url = url, .basic_auth = "u:p", .timeout = 2});
  Status st = gone.join(0x2001, {"0000000000000001"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, corral::Errc::unavailable);
}

TEST(UfmSubnetManager, RefusesCredentialsOthersCanRead) {
  fs::path dir = temp_dir("ufmcred");
  std::ofstream(dir / "cred") << "u:p\n";
  ::chmod((dir / "cred").c_str(), 0644);
  IbConfig cfg;
  cfg.subnet_manager = "ufm";
  cfg.ufm_url = "https://ufm.example.org";
  cfg.ufm_credentials = (dir / "cred").string();
  auto sm = make_subnet_manager(cfg);
  ASSERT_FALSE(sm.ok());
  EXPECT_NE(sm.message().find("chmod 600"), std::string::npos) << sm.message();
  ::chmod((dir / "cred").c_str(), 0600);
  sm = make_subnet_manager(cfg);
  ASSERT_TRUE(sm.ok()) << sm.message();
  EXPECT_EQ((*sm)->describe(), "UFM at https://ufm.example.org");
  cfg.ufm_url = "ftp://x";
  EXPECT_FALSE(make_subnet_manager(cfg).ok());
  fs::remove_all(dir);
}

}  // namespace
