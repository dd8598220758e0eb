// Spawning a process: exit statuses, output capture, failures, process-group kills and
// (as root) corral-imp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "node/exec/spawn_process.h"

namespace corral::node {
namespace {

namespace fs = std::filesystem;

int wait_for(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return st;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

SpawnRequest sh(const std::string& script) {
  SpawnRequest r;
  r.argv = {"/bin/sh", "-c", script};
  r.env = {"PATH=/usr/bin:/bin", "FOO=bar"};
  r.cwd = "/";
  return r;
}

class SpawnProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("corral-launch-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SpawnProcess, CollectsExitStatus) {
  auto p = spawn_process(sh("exit 3"));
  ASSERT_TRUE(p) << p.message();
  int st = wait_for(p->pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 3);
}

TEST_F(SpawnProcess, CapturesStdoutAndStderrSeparately) {
  auto p = spawn_process(sh("echo out $FOO; echo err >&2; pwd"));
  ASSERT_TRUE(p) << p.message();
  ASSERT_TRUE(p->stdout_pipe.valid());
  ASSERT_TRUE(p->stderr_pipe.valid());
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "out bar\n/\n");
  EXPECT_EQ(read_all(p->stderr_pipe.get()), "err\n");
  wait_for(p->pid);
}

TEST_F(SpawnProcess, MergedStderrSharesThePipe) {
  auto r = sh("echo a; echo b >&2");
  r.merge_stderr = true;
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_FALSE(p->stderr_pipe.valid());
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "a\nb\n");
  wait_for(p->pid);
}

TEST_F(SpawnProcess, CommandNotFoundIs127) {
  SpawnRequest r = sh("");
  r.argv = {"no-such-command-corral"};
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(spawn_failure_code(p.error()), 127);
  EXPECT_EQ(p.message(), "cannot execute 'no-such-command-corral': No such file or directory");
}

TEST_F(SpawnProcess, NotExecutableIs126) {
  std::ofstream(dir_ / "script") << "echo hi\n";
  SpawnRequest r = sh("");
  r.argv = {(dir_ / "script").string()};
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(spawn_failure_code(p.error()), 126);
  EXPECT_NE(p.message().find("Permission denied"), std::string::npos) << p.message();
}

TEST_F(SpawnProcess, MissingCwdIs126AndTheMessageReachesTheErrorFile) {
  SpawnRequest r = sh("true");
  r.cwd = (dir_ / "missing").string();
  r.output_path = (dir_ / "out.txt").string();
  r.error_path = r.output_path;
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(spawn_failure_code(p.error()), 126);
  EXPECT_NE(p.message().find("cannot change directory to '"), std::string::npos) << p.message();
  EXPECT_EQ(slurp(dir_ / "out.txt"), p.message() + "\n");
}

// With a nice value (or a cgroup, CPUs, limits) the child is spawn_child's, which checks
// nothing before it tries: its report words each failure as the checks above do.
TEST_F(SpawnProcess, TheChildReportsAMissingCwdAndProgramAsTheChecksWould) {
  const int own = ::getpriority(PRIO_PROCESS, 0);
  SpawnRequest r = sh("true");
  r.cwd = (dir_ / "missing").string();
  r.output_path = (dir_ / "out.txt").string();
  r.error_path = r.output_path;
  auto cwd = spawn_process(r, own);
  ASSERT_FALSE(cwd);
  EXPECT_EQ(spawn_failure_code(cwd.error()), 126);
  EXPECT_EQ(cwd.message(), "cannot change directory to '" + r.cwd + "': No such file or directory");
  EXPECT_EQ(slurp(dir_ / "out.txt"), cwd.message() + "\n");

  SpawnRequest m = sh("");
  m.argv = {(dir_ / "no-such-program").string()};
  auto missing = spawn_process(m, own);
  ASSERT_FALSE(missing);
  EXPECT_EQ(spawn_failure_code(missing.error()), 127);
  EXPECT_EQ(missing.message(), "cannot execute '" + m.argv[0] + "': No such file or directory");

  std::ofstream(dir_ / "script") << "echo hi\n";
  for (const auto& path : {dir_ / "script", dir_}) {  // not executable; a directory
    SpawnRequest n = sh("");
    n.argv = {path.string()};
    auto denied = spawn_process(n, own);
    ASSERT_FALSE(denied) << path;
    EXPECT_EQ(spawn_failure_code(denied.error()), 126) << path;
    EXPECT_EQ(denied.message(), "cannot execute '" + path.string() + "': Permission denied");
  }
}

TEST_F(SpawnProcess, RelativeCommandAndFilesUseCwd) {
  {
    std::ofstream f(dir_ / "prog");
    f << "#!/bin/sh\necho \"from prog $1\"\necho to-err >&2\n";
  }
  fs::permissions(dir_ / "prog", fs::perms::owner_all);
  SpawnRequest r = sh("");
  r.argv = {"./prog", "x"};
  r.cwd = dir_.string();
  r.output_path = (dir_ / "o.txt").string();
  r.error_path = (dir_ / "e.txt").string();
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(slurp(dir_ / "o.txt"), "from prog x\n");
  EXPECT_EQ(slurp(dir_ / "e.txt"), "to-err\n");
  // O_APPEND: a second run adds to the file
  auto q = spawn_process(r);
  ASSERT_TRUE(q);
  wait_for(q->pid);
  EXPECT_EQ(slurp(dir_ / "o.txt"), "from prog x\nfrom prog x\n");
}

TEST_F(SpawnProcess, UnwritableOutputFails) {
  SpawnRequest r = sh("true");
  r.output_path = (dir_ / "nodir" / "o.txt").string();
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(spawn_failure_code(p.error()), 126);
  EXPECT_NE(p.message().find("cannot open output file"), std::string::npos) << p.message();
}

TEST_F(SpawnProcess, KillpgReachesTheWholeTree) {
  auto r = sh("sleep 100 & echo $!; sleep 100");
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  // the first line is the pid of the background sleep
  std::string line;
  char c;
  while (::read(p->stdout_pipe.get(), &c, 1) == 1 && c != '\n') line += c;
  if (line.empty()) {
    pollfd pf{p->stdout_pipe.get(), POLLIN, 0};
    ::poll(&pf, 1, 5000);
    while (::read(p->stdout_pipe.get(), &c, 1) == 1 && c != '\n') line += c;
  }
  pid_t bg = static_cast<pid_t>(std::stol(line));
  EXPECT_EQ(::getpgid(bg), p->pid);  // the task's group is its own pid
  ASSERT_EQ(::killpg(p->pid, SIGTERM), 0);
  int st = wait_for(p->pid);
  EXPECT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    // the background sleep may be a zombie of ours (subreaper) or gone entirely
    std::ifstream stat("/proc/" + std::to_string(bg) + "/stat");
    std::string s;
    std::getline(stat, s);
    gone = s.empty() || s.find(") Z") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone);
}

TEST_F(SpawnProcess, SignalMaskIsResetInTheChild) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  auto p = spawn_process(sh("kill -TERM $$; sleep 5"));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(p);
  int st = wait_for(p->pid);
  EXPECT_TRUE(WIFSIGNALED(st));
}

TEST_F(SpawnProcess, FindExecutableUsesTheTaskPath) {
  auto found = find_executable("sh", {"PATH=/nonexistent:/bin"}, "/");
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(*found, "/bin/sh");
  EXPECT_FALSE(find_executable("sh", {"PATH=/nonexistent"}, "/"));
}

// corral-imp next to this test binary (both land in the build's bin/).
std::string imp_path() {
  auto self = fs::read_symlink("/proc/self/exe");
  return (self.parent_path() / "corral-imp").string();
}

// The request, run through corral-imp as nobody.
SpawnRequest as_nobody(SpawnRequest r) {
  r.imp_path = imp_path();
  r.uid = 65534;
  r.gid = 65534;
  return r;
}

TEST_F(SpawnProcess, ImpRunsAsTheUserAndCreatesTheirFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  fs::permissions(dir_, fs::perms::all);
  SpawnRequest r = sh("id -u; id -g; echo $FOO $LD_PRELOAD; pwd; echo e >&2");
  r.cwd = dir_.string();
  r.output_path = (dir_ / "o.txt").string();
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(read_all(p->stderr_pipe.get()), "e\n");
  EXPECT_EQ(slurp(dir_ / "o.txt"), "65534\n65534\nbar\n" + dir_.string() + "\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "o.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

TEST_F(SpawnProcess, ImpReportsExecFailureOnTheStatusPipe) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  SpawnRequest r = sh("");
  r.argv = {"no-such-command-corral"};
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  int st = wait_for(p->pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 127);
  EXPECT_EQ(read_all(p->status_pipe.get()), "cannot execute 'no-such-command-corral': No such file or directory");
  EXPECT_EQ(read_all(p->stderr_pipe.get()),
            "corral-imp: cannot execute 'no-such-command-corral': No such file or directory\n");
}

TEST_F(SpawnProcess, ImpOpensFilesAsTheUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  fs::permissions(dir_, fs::perms::owner_all);  // root only: nobody cannot create files here
  SpawnRequest r = sh("true");
  r.output_path = (dir_ / "o.txt").string();
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  int st = wait_for(p->pid);
  EXPECT_EQ(WEXITSTATUS(st), 126);
  EXPECT_NE(read_all(p->status_pipe.get()).find("cannot open output file"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "o.txt"));
}

// Descriptors for inherit_fds, made the way the agent makes all of its own: close-on-exec.
struct CloexecPipe {
  UniqueFd read, write;
  CloexecPipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read = UniqueFd(fds[0]);
    write = UniqueFd(fds[1]);
  }
};

// What the task reports: "closed" when $OTHER is not open in it, after writing to $FD.
SpawnRequest write_to_inherited(int fd, int other) {
  auto r = sh("echo hi >&$FD; if [ -e /proc/$$/fd/$OTHER ]; then echo open; else echo closed; fi");
  r.env.push_back("FD=" + std::to_string(fd));
  r.env.push_back("OTHER=" + std::to_string(other));
  return r;
}

TEST_F(SpawnProcess, InheritedDescriptorStaysOpenInTheTask) {
  CloexecPipe pmi, other;
  auto r = write_to_inherited(pmi.write.get(), other.write.get());
  r.inherit_fds = {pmi.write.get()};
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "closed\n");
  EXPECT_EQ(read_all(p->stderr_pipe.get()), "");
  EXPECT_EQ(::fcntl(pmi.write.get(), F_GETFD), FD_CLOEXEC);  // the agent's copy is untouched
  pmi.write.reset();
  EXPECT_EQ(read_all(pmi.read.get()), "hi\n");
}

TEST_F(SpawnProcess, UnlistedDescriptorIsClosedInTheTask) {
  CloexecPipe pmi;
  auto r = write_to_inherited(pmi.write.get(), pmi.write.get());
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  wait_for(p->pid);
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "closed\n");
  EXPECT_NE(read_all(p->stderr_pipe.get()), "");  // the shell could not redirect to it
  pmi.write.reset();
  EXPECT_EQ(read_all(pmi.read.get()), "");
}

TEST_F(SpawnProcess, InheritedDescriptorsMustBeOpenAndNotStdio) {
  auto r = sh("true");
  r.inherit_fds = {1};
  auto p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, Errc::invalid_argument);
  EXPECT_NE(p.message().find("cannot pass descriptor 1 to the task"), std::string::npos) << p.message();

  int closed = 0;
  {
    CloexecPipe gone;
    closed = gone.write.get();
  }
  r.inherit_fds = {closed};
  p = spawn_process(r);
  ASSERT_FALSE(p);
  EXPECT_NE(p.message().find("is not an open descriptor"), std::string::npos) << p.message();
}

TEST_F(SpawnProcess, ImpPassesInheritedDescriptorsEvenOnItsOwnNumbers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  // ctest may hand the test process an open descriptor 3: park it for the test's length.
  struct Parked {
    UniqueFd saved;
    ~Parked() {
      if (saved.valid()) ::dup3(saved.get(), 3, O_CLOEXEC);
    }
  } parked;
  if (::fcntl(3, F_GETFD) >= 0) {
    parked.saved = UniqueFd(::fcntl(3, F_DUPFD_CLOEXEC, 30));
    ASSERT_TRUE(parked.saved.valid());
    ::close(3);
  }
  // Descriptor 3 is where corral-imp reads the environment from by default.
  CloexecPipe pmi, other;
  for (UniqueFd* fd : {&pmi.read, &pmi.write, &other.read, &other.write})
    *fd = UniqueFd(::fcntl(fd->get(), F_DUPFD_CLOEXEC, 20));  // frees 3 again
  ASSERT_LT(::fcntl(3, F_GETFD), 0);
  UniqueFd at3(::dup3(pmi.write.get(), 3, O_CLOEXEC));
  ASSERT_EQ(at3.get(), 3);
  pmi.write.reset();
  auto r = write_to_inherited(3, other.write.get());
  r.argv[2] += "; echo $FOO";  // the environment still arrives, through another number
  r.inherit_fds = {3};
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "closed\nbar\n");
  EXPECT_EQ(read_all(p->status_pipe.get()), "");
  at3.reset();
  EXPECT_EQ(read_all(pmi.read.get()), "hi\n");
}

TEST_F(SpawnProcess, NotesGoToTheErrorFileBeforeTheTasksOwnOutput) {
  SpawnRequest r = sh("echo from-task >&2");
  r.error_path = (dir_ / "e.txt").string();
  r.stderr_note = "corral: a note\n";
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(slurp(dir_ / "e.txt"), "corral: a note\nfrom-task\n");
}

// The notes are written through corral-imp after it became the user: a file the user may
// not write stays untouched and the task fails, instead of root appending to it and
// handing it over (the `-e /etc/shadow` attack).
TEST_F(SpawnProcess, ImpWritesNotesAsTheUserOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  fs::permissions(dir_, fs::perms::all);
  const fs::path victim = dir_ / "roots-file";
  { std::ofstream(victim) << "root's\n"; }
  fs::permissions(victim,
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  SpawnRequest r = sh("echo ran");
  r.error_path = victim.string();
  r.stderr_note = "corral: a note\n";
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(WEXITSTATUS(wait_for(p->pid)), 126);
  EXPECT_NE(read_all(p->status_pipe.get()).find("cannot open error file"), std::string::npos);
  EXPECT_EQ(slurp(victim), "root's\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);

  // Where the user may write, the notes come first, and the file is the user's.
  r.error_path = (dir_ / "e.txt").string();
  r.argv = {"/bin/sh", "-c", "echo from-task >&2"};
  p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(slurp(dir_ / "e.txt"), "corral: a note\nfrom-task\n");
  ASSERT_EQ(::stat((dir_ / "e.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

// A descriptor the agent opened without close-on-exec (a library's log file) must not
// reach a task that corral-imp starts.
TEST_F(SpawnProcess, ImpClosesWhatItWasNotAskedToPass) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!fs::exists(imp_path())) GTEST_SKIP() << "corral-imp not built next to the test";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);  // deliberately inheritable
  UniqueFd leak_r(fds[0]), leak_w(fds[1]);
  auto r = sh("if [ -e /proc/$$/fd/$OTHER ]; then echo open; else echo closed; fi");
  r.env.push_back("OTHER=" + std::to_string(leak_w.get()));
  r = as_nobody(std::move(r));
  auto p = spawn_process(r);
  ASSERT_TRUE(p) << p.message();
  EXPECT_EQ(wait_for(p->pid), 0);
  EXPECT_EQ(read_all(p->stdout_pipe.get()), "closed\n");
}

}  // namespace
}  // namespace corral::node
