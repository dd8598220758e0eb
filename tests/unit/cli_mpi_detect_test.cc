// --mpi=auto on the command's side: the libraries a program needs, read from its ELF
// dynamic section, and the PMIx that Open MPI and libpmix programs get.
#include "cli/mpi_detect.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "test_programs.h"

namespace corral::cli {
namespace {

namespace fs = std::filesystem;

class MpiDetectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("corral-mpi-detect-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ctx_.cwd = dir_.string();
    ctx_.env["PATH"] = (dir_ / "bin").string() + ":/usr/bin:/bin";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  JobContext ctx_;
};

TEST_F(MpiDetectTest, OpenMpiAndPmixProgramsGetPmix) {
  const auto ring = test::test_data_dir() / "mpi" / "pmi_ring.c";
  ASSERT_EQ(test::run_command({"mpicc.openmpi", "-o", (dir_ / "ompi").string(), ring.string()}), 0);
  ASSERT_EQ(test::run_command({"mpicc.mpich", "-o", (dir_ / "mpich").string(), ring.string()}), 0);
  ASSERT_EQ(test::run_command({"sh", "-c",
                               "cc -o '" + (dir_ / "pmix").string() + "' '" +
                                   (test::test_data_dir() / "mpi" / "pmix_fence.c").string() +
                                   "' $(pkg-config --cflags --libs pmix)"}),
            0);
  auto needed = elf_needed_libraries((dir_ / "ompi").string());
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libmpi.so.40"), needed.end());
  EXPECT_EQ(mpi_for_program("./ompi", ctx_), "pmix");                 // relative to the working directory
  EXPECT_EQ(mpi_for_program((dir_ / "pmix").string(), ctx_), "pmix");  // libpmix.so.2
  EXPECT_EQ(mpi_for_program("./mpich", ctx_), "");                    // MPICH: PMI-1, the default
  fs::create_directories(dir_ / "bin");
  fs::copy_file(dir_ / "ompi", dir_ / "bin" / "found-in-path");
  EXPECT_EQ(mpi_for_program("found-in-path", ctx_), "pmix");
}

TEST_F(MpiDetectTest, AnythingElseGetsNothing) {
  EXPECT_EQ(mpi_for_program("true", ctx_), "");  // /usr/bin/true: no MPI
  EXPECT_EQ(mpi_for_program("no-such-program-here", ctx_), "");
  EXPECT_EQ(mpi_for_program("", ctx_), "");
  std::ofstream(dir_ / "script") << "#!/bin/sh\nexec ./ompi\n";
  EXPECT_EQ(mpi_for_program("./script", ctx_), "");
  std::ofstream(dir_ / "short") << "\x7f" "ELF\x02\x01";  // a header cut short
  EXPECT_TRUE(elf_needed_libraries((dir_ / "short").string()).empty());
  EXPECT_TRUE(elf_needed_libraries("/dev/null").empty());
  EXPECT_TRUE(elf_needed_libraries(dir_.string()).empty());  // a directory
}

}  // namespace
}  // namespace corral::cli
