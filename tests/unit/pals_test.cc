// Cray PALS on a node (src/node/pals): the apinfo file's bytes read back field by field at
// the format's offsets, the layouts it refuses, the spool directory handed to the user
// and removed without following links, the task variables, and the control ports.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "job/port_range.h"
#include "node/pals/apinfo.h"
#include "node/pals/node_pals.h"
#include "node/pals/pals_spool.h"

namespace corral::node {
namespace {

namespace fs = std::filesystem;

template <typename T>
T at(const std::string& bytes, std::size_t offset) {
  T v{};
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

TEST(PalsApinfo, HeaderAndSectionsAtTheFormatsOffsets) {
  auto bytes = pals::apinfo_bytes({{"nid001", "nid002"}, {3, 1}, 2});
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  const std::string& b = *bytes;
  // Header (LP64): version, total_size, then (size, offset, count) per section.
  EXPECT_EQ(at<int32_t>(b, 0), 5);
  EXPECT_EQ(at<uint64_t>(b, 8), b.size());
  EXPECT_EQ(at<uint64_t>(b, 16), 36u);   // comm profile size
  EXPECT_EQ(at<int32_t>(b, 32), 0);      // no comm profiles
  EXPECT_EQ(at<uint64_t>(b, 40), 12u);   // cmd size
  const auto cmd_offset = at<uint64_t>(b, 48);
  EXPECT_EQ(cmd_offset, 160u);
  EXPECT_EQ(at<int32_t>(b, 56), 1);
  EXPECT_EQ(at<uint64_t>(b, 64), 12u);   // pe size
  const auto pe_offset = at<uint64_t>(b, 72);
  EXPECT_EQ(at<int32_t>(b, 80), 4);      // npes
  EXPECT_EQ(at<uint64_t>(b, 88), 68u);   // node size
  const auto node_offset = at<uint64_t>(b, 96);
  EXPECT_EQ(at<int32_t>(b, 104), 2);     // nnodes
  EXPECT_EQ(at<uint64_t>(b, 112), 112u); // nic size
  EXPECT_EQ(at<int32_t>(b, 128), 0);     // no NICs
  EXPECT_EQ(at<uint64_t>(b, 136), 0u);   // no status section
  EXPECT_EQ(at<uint64_t>(b, 152), 0u);   // no distances
  EXPECT_EQ(b.size(), 160u + 12 + 4 * 12 + 2 * 68);
  // The command: 4 PEs, at most 3 a node, 2 CPUs each.
  EXPECT_EQ(at<int32_t>(b, cmd_offset), 4);
  EXPECT_EQ(at<int32_t>(b, cmd_offset + 4), 3);
  EXPECT_EQ(at<int32_t>(b, cmd_offset + 8), 2);
  // PEs in rank order: (local index, command, node).
  const int32_t want[4][3] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {0, 0, 1}};
  for (int r = 0; r < 4; ++r)
    for (int f = 0; f < 3; ++f)
      EXPECT_EQ(at<int32_t>(b, pe_offset + 12 * r + 4 * f), want[r][f]) << "rank " << r << " field " << f;
  EXPECT_EQ(at<int32_t>(b, node_offset + 68), 1);
  EXPECT_STREQ(b.data() + node_offset + 4, "nid001");
  EXPECT_STREQ(b.data() + node_offset + 68 + 4, "nid002");
}

TEST(PalsApinfo, LayoutsTheFileCannotHold) {
  EXPECT_FALSE(pals::apinfo_bytes({{}, {}, 1}).ok());
  EXPECT_FALSE(pals::apinfo_bytes({{"a", "b"}, {1}, 1}).ok());
  EXPECT_FALSE(pals::apinfo_bytes({{"a"}, {0}, 1}).ok());
  auto long_name = pals::apinfo_bytes({{std::string(64, 'n')}, {1}, 1});
  ASSERT_FALSE(long_name.ok());
  EXPECT_NE(long_name.message().find("1 to 63 characters"), std::string::npos);
  EXPECT_TRUE(pals::apinfo_bytes({{std::string(63, 'n')}, {1}, 1}).ok());
  EXPECT_FALSE(pals::apinfo_bytes({{"a", "b"}, {1u << 20, 1}, 1}).ok());
}

class PalsSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("corral-pals-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    base_ = (root_ / "pals").string();
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
  std::string base_;
};

TEST_F(PalsSpoolTest, TheUsersOwnDirectoryWithTheFileAndGoneAfter) {
  const bool root = ::geteuid() == 0;
  const uid_t uid = root ? 4242 : ::geteuid();
  {
    auto spool = pals::PalsSpool::create(base_, "7.0.n1", uid, root ? 4242 : ::getegid(), "apinfo-bytes");
    ASSERT_TRUE(spool.ok()) << spool.message();
    struct stat st {};
    ASSERT_EQ(::stat(base_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0711u);  // users pass through, never list
    ASSERT_EQ(::stat((*spool)->dir().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_EQ(st.st_uid, uid);
    ASSERT_EQ(::stat((*spool)->apinfo_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    std::ifstream in((*spool)->apinfo_path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text, "apinfo-bytes");
    // What the user leaves there (nested, and a link out of it) goes, the target stays.
    fs::create_directories(fs::path((*spool)->dir()) / "a" / "b");
    std::ofstream(fs::path((*spool)->dir()) / "a" / "b" / "f") << "x";
    std::ofstream(root_ / "outside") << "keep";
    fs::create_symlink(root_ / "outside", fs::path((*spool)->dir()) / "link");
    fs::create_directory_symlink(root_, fs::path((*spool)->dir()) / "a" / "up");
  }
  EXPECT_FALSE(fs::exists(fs::path(base_) / "7.0.n1"));
  EXPECT_TRUE(fs::exists(root_ / "outside"));
  EXPECT_TRUE(fs::exists(root_ / "pals"));
}

TEST_F(PalsSpoolTest, AStaleDirectoryIsReplacedAndNamesAreOneComponent) {
  fs::create_directories(fs::path(base_) / "7.1.n0" / "old");
  auto spool = pals::PalsSpool::create(base_, "7.1.n0", ::geteuid(), ::getegid(), "new");
  ASSERT_TRUE(spool.ok()) << spool.message();
  EXPECT_FALSE(fs::exists(fs::path(base_) / "7.1.n0" / "old"));
  for (const char* bad : {"", ".", "..", "a/b", "x y"})
    EXPECT_FALSE(pals::PalsSpool::create(base_, bad, ::geteuid(), ::getegid(), "").ok()) << bad;
}

TEST_F(PalsSpoolTest, RemovalStopsAtItsBudget) {
  fs::create_directories(root_ / "big");
  for (int i = 0; i < 20; ++i) std::ofstream(root_ / "big" / std::to_string(i)) << i;
  EXPECT_FALSE(pals::remove_tree(root_.string(), "big", 5));
  EXPECT_TRUE(fs::exists(root_ / "big"));
  EXPECT_TRUE(pals::remove_tree(root_.string(), "big"));
  EXPECT_FALSE(fs::exists(root_ / "big"));
  EXPECT_TRUE(pals::remove_tree(root_.string(), "missing"));
}

TEST_F(PalsSpoolTest, StepChecksItsLayoutOnceAndEachNodeGivesTheVariables) {
  PalsStepInfo info;
  info.layout = {{"n0", "n1"}, {2, 2}, 1};
  info.apid = "9.3";
  info.secret = "12345";
  info.base = base_;
  info.uid = ::geteuid();
  info.gid = ::getegid();
  auto no_ports = PalsStep::make(info);
  ASSERT_FALSE(no_ports.ok());
  EXPECT_NE(no_ports.message().find("needs MPI ports"), std::string::npos);
  auto relative = info;
  relative.base = "pals";
  relative.control_ports = "1";
  EXPECT_NE(PalsStep::make(relative).message().find("--state-dir"), std::string::npos);
  info.control_ports = job::pals_control_ports({12000, 12002});
  EXPECT_EQ(info.control_ports, "12000,12001");
  auto step = PalsStep::make(info);
  ASSERT_TRUE(step.ok()) << step.message();
  EXPECT_NE((*step)->start_node(1, "n1", 1, 2).message().find("disagrees"), std::string::npos);  // wrong first rank
  EXPECT_NE((*step)->start_node(2, "n2", 4, 1).message().find("disagrees"), std::string::npos);  // not in it
  EXPECT_EQ((*step)->index_of("n1"), 1u);
  EXPECT_FALSE((*step)->index_of("n9"));
  auto node = (*step)->start_node(1, "n1", 2, 2);
  ASSERT_TRUE(node.ok()) << node.message();
  auto other = (*step)->start_node(0, "n0", 0, 2);  // a second node of this agent, its own spool
  ASSERT_TRUE(other.ok()) << other.message();
  EXPECT_NE((*other)->spool_dir(), (*node)->spool_dir());
  auto env = (*node)->task_env(3);
  const std::string spool = base_ + "/9.3.n1";
  EXPECT_EQ(env, (std::vector<std::string>{"PALS_APID=9.3", "PALS_APINFO=" + spool + "/apinfo", "PALS_RANKID=3",
                                           "PALS_NODEID=1", "PALS_SPOOL_DIR=" + spool, "PMI_SHARED_SECRET=12345",
                                           "PMI_CONTROL_PORT=12000,12001"}));
  EXPECT_EQ(job::pals_control_ports({12000, 12000}), "12000");
  EXPECT_EQ(pals_base(""), "");
  EXPECT_EQ(pals_base("/var/lib/corral"), "/var/lib/corral/pals");
}

}  // namespace
}  // namespace corral::node
