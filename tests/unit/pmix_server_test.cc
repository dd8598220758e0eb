// The agent's PMIx server (OpenPMIx's server library): layouts, the exchange that lets
// one agent's nodes fence as one, and real clients nobody here wrote the library of: a
// PMIx program (tests/data/mpi/pmix_fence.c, built with libpmix at test time) and
// Debian's Open MPI (pmi_ring.c built with mpicc.openmpi), served by one server.
#include "node/pmix/pmix_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "job/hmac_key.h"
#include "test_programs.h"

extern char** environ;

namespace corral::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::run_command;
using test::test_data_dir;

// ---- layouts -------------------------------------------------------------------------

TEST(PmixLayout, BlocksInNodeOrder) {
  auto l = pmix_block_layout("corral.7.1", {"n0", "n1", "n2"}, {2, 3, 1}, {"n2", "n1"}, 1000, 1000);
  ASSERT_TRUE(l.ok()) << l.message();
  EXPECT_EQ(l->ranks[0], (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(l->ranks[1], (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_EQ(l->ranks[2], (std::vector<uint32_t>{5}));
  EXPECT_EQ(l->local, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(pmix_fence_key(*l), "pmix.n1");  // named after the agent's first node
}

TEST(PmixLayout, RefusesWhatDisagrees) {
  EXPECT_NE(pmix_block_layout("ns", {"n0", "n1"}, {2}, {"n0"}, 0, 0).message().find("2 nodes but gives 1"),
            std::string::npos);
  EXPECT_NE(pmix_block_layout("ns", {"n0"}, {2}, {"n9"}, 0, 0).message().find("node n9 is missing"),
            std::string::npos);
  EXPECT_NE(pmix_block_layout("ns", {"n0", "n1"}, {2, 0}, {"n1"}, 0, 0).message().find("local node has no ranks"),
            std::string::npos);
  EXPECT_NE(pmix_block_layout("ns", {"a,b"}, {1}, {"a,b"}, 0, 0).message().find("comma"), std::string::npos);
  EXPECT_NE(pmix_block_layout(std::string(300, 'x'), {"n0"}, {1}, {"n0"}, 0, 0).message().find("too long"),
            std::string::npos);
  EXPECT_NE(pmix_block_layout("ns", {"n0", "n1"}, {1u << 22, 1}, {"n0"}, 0, 0).message().find("more than"),
            std::string::npos);
  PmixLayout twice{"ns", {"n0"}, {{0, 0}}, {0}, 0, 0};
  EXPECT_NE(check_pmix_layout(twice).message().find("rank 0"), std::string::npos);
}

// ---- one contribution for several nodes ----------------------------------------------

class RecordingExchange final : public PmiExchange {
 public:
  void fence(PmiKvs local_puts, Done done) override {
    seen.push_back(std::move(local_puts));
    pending.push_back(std::move(done));
  }
  std::vector<PmiKvs> seen;
  std::vector<Done> pending;
};

TEST(SharedNodesExchange, FirstNodeCarriesThePutsAndDoneWaitsForAll) {
  RecordingExchange a, b;
  SharedNodesExchange shared([&]() -> Result<std::vector<PmiExchange*>> { return std::vector<PmiExchange*>{&a, &b}; });
  std::optional<Result<PmiKvs>> got;
  shared.fence({{"k", "v"}}, [&](Result<PmiKvs> all) { got = std::move(all); });
  ASSERT_EQ(a.seen.size(), 1u);
  ASSERT_EQ(b.seen.size(), 1u);
  EXPECT_EQ(a.seen[0], (PmiKvs{{"k", "v"}}));
  EXPECT_TRUE(b.seen[0].empty());
  a.pending[0](PmiKvs{{"k", "v"}, {"x", "y"}});
  EXPECT_FALSE(got.has_value());  // b has not answered
  b.pending[0](PmiKvs{{"k", "v"}, {"x", "y"}});
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_EQ(got->value().size(), 2u);
}

TEST(SharedNodesExchange, AnyErrorIsTheAnswer) {
  RecordingExchange a, b;
  SharedNodesExchange shared([&]() -> Result<std::vector<PmiExchange*>> { return std::vector<PmiExchange*>{&a, &b}; });
  std::optional<Result<PmiKvs>> got;
  shared.fence({}, [&](Result<PmiKvs> all) { got = std::move(all); });
  a.pending[0](PmiKvs{});
  b.pending[0](Error{Errc::unavailable, "node n1 went away"});
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->message(), "node n1 went away");

  SharedNodesExchange none([]() -> Result<std::vector<PmiExchange*>> { return std::vector<PmiExchange*>{}; });
  none.fence({}, [&](Result<PmiKvs> all) { got = std::move(all); });
  EXPECT_FALSE(got->ok());
}

// ---- the real server -----------------------------------------------------------------

// An exchange the test answers by hand (from any thread: the answer is posted to the loop).
class ManualExchange final : public PmiExchange {
 public:
  void fence(PmiKvs local_puts, Done done) override {
    std::lock_guard lock(mu);
    puts.push_back(std::move(local_puts));
    pending.push_back(std::move(done));
  }
  std::mutex mu;
  std::vector<PmiKvs> puts;
  std::vector<Done> pending;
};

struct Rank {
  pid_t pid = -1;
  UniqueFd out;
  int status = -1;
  std::string output;
};

// One server for the whole suite: the library allows one per process.
class PmixServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("corral-pmix-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "rendezvous");
    fs::permissions(dir_ / "rendezvous", fs::perms::owner_all);
    fence_program_ = dir_ / "pmix_fence";
    compiled_fence_ = run_command({"sh", "-c",
                                   "cc -o '" + fence_program_.string() + "' '" +
                                       (test_data_dir() / "mpi" / "pmix_fence.c").string() +
                                       "' $(pkg-config --cflags --libs pmix)"});
    ring_program_ = dir_ / "ompi_ring";
    compiled_ring_ = run_command(
        {"mpicc.openmpi", "-o", ring_program_.string(), (test_data_dir() / "mpi" / "pmi_ring.c").string()});
    // As corral-node's main does: the library's data store stays in the server (hash),
    // not in shared-memory files under the rendezvous directory.
    ::setenv("PMIX_MCA_gds", "hash", 1);
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok()) << l.message();
    loop_ = std::move(*l);
    auto s = PmixServer::start(*loop_, (dir_ / "rendezvous").string(), "n0");
    ASSERT_TRUE(s.ok()) << s.message();
    server_ = std::move(*s);
    thread_ = std::thread([] { loop_->run(); });
  }
  static void TearDownTestSuite() {
    if (thread_.joinable()) {
      loop_->post([] { loop_->stop(); });
      thread_.join();
    }
    server_.reset();
    loop_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  template <class F>
  static auto on_loop(F f) {
    std::promise<decltype(f())> p;
    auto fut = p.get_future();
    loop_->post([&] { p.set_value(f()); });
    return fut.get();
  }
  void TearDown() override {
    on_loop([this] {
      spaces_.clear();
      return 0;
    });
  }

  PmiCallbacks callbacks() {
    PmiCallbacks cb;
    cb.on_abort = [this](const PmiAbort& a) {
      std::lock_guard lock(mu_);
      aborts_.push_back(a);
    };
    cb.on_error = [this](int, const std::string& msg) {
      std::lock_guard lock(mu_);
      errors_.push_back(msg);
    };
    return cb;
  }
  // Registers a namespace; returns it (owned by the test).
  PmixNamespace* add(PmixLayout layout, PmiExchange& ex) {
    return on_loop([&]() -> PmixNamespace* {
      auto ns = server_->add(std::move(layout), ex, callbacks());
      EXPECT_TRUE(ns.ok()) << ns.message();
      if (!ns) return nullptr;
      spaces_.push_back(std::move(*ns));
      return spaces_.back().get();
    });
  }
  // fork+exec of one rank with the variables the namespace gives it.
  Rank spawn(PmixNamespace& ns, uint32_t rank, const fs::path& program, std::vector<std::string> args = {},
             uid_t as_uid = 0) {
    Rank r;
    auto env = on_loop([&] { return ns.task_env(rank); });
    EXPECT_TRUE(env.ok()) << env.message();
    std::vector<std::string> all;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "PMI", 3) != 0 && std::strncmp(*e, "OMPI_", 5) != 0) all.emplace_back(*e);
    if (env) all.insert(all.end(), env->begin(), env->end());
    std::vector<char*> envp, argv;
    for (auto& e : all) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string path = program.string();
    argv.push_back(path.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    r.out.reset(fds[0]);
    UniqueFd w(fds[1]);
    r.pid = ::fork();
    if (r.pid == 0) {
      ::dup2(w.get(), STDOUT_FILENO);
      if (as_uid != 0 && (::setgid(as_uid) != 0 || ::setuid(as_uid) != 0)) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    return r;
  }
  void wait_all(std::vector<Rank>& ranks, std::chrono::seconds timeout = 60s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t left = ranks.size();
    while (left > 0) {
      for (auto& r : ranks) {
        int status = 0;
        if (r.status == -1 && ::waitpid(r.pid, &status, WNOHANG) == r.pid) {
          r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --left;
        }
      }
      if (std::chrono::steady_clock::now() > deadline)
        for (auto& r : ranks)
          if (r.status == -1) ::kill(r.pid, SIGKILL);
      std::this_thread::sleep_for(10ms);
    }
    for (auto& r : ranks) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(r.out.get(), buf, sizeof buf)) > 0) r.output.append(buf, static_cast<std::size_t>(n));
    }
  }
  static PmixLayout one_node(const std::string& nspace, uint32_t ranks) {
    PmixLayout l{nspace, {"n0"}, {{}}, {0}, ::getuid(), ::getgid()};
    for (uint32_t r = 0; r < ranks; ++r) l.ranks[0].push_back(r);
    return l;
  }

  static inline fs::path dir_, fence_program_, ring_program_;
  static inline int compiled_fence_ = -1, compiled_ring_ = -1;
  static inline std::unique_ptr<EventLoop> loop_;
  static inline std::unique_ptr<PmixServer> server_;
  static inline std::thread thread_;
  std::vector<std::unique_ptr<PmixNamespace>> spaces_;
  std::mutex mu_;
  std::vector<PmiAbort> aborts_;
  std::vector<std::string> errors_;
};

TEST_F(PmixServerTest, OpenMpiRingAndAllreduceOnOneNode) {
  ASSERT_EQ(compiled_ring_, 0) << "mpicc.openmpi could not build pmi_ring.c (apt-get install libopenmpi-dev openmpi-bin)";
  ManualExchange ex;
  PmixNamespace* ns = add(one_node("corral.1.0", 4), ex);
  ASSERT_NE(ns, nullptr);
  std::vector<Rank> ranks;
  for (uint32_t r = 0; r < 4; ++r) ranks.push_back(spawn(*ns, r, ring_program_));
  wait_all(ranks);
  std::string all;
  for (auto& r : ranks) {
    EXPECT_EQ(r.status, 0) << r.output;
    all += r.output;
  }
  for (int r = 0; r < 4; ++r) EXPECT_NE(all.find("rank " + std::to_string(r) + " of 4"), std::string::npos) << all;
  EXPECT_NE(all.find("ring and allreduce ok"), std::string::npos) << all;
}

TEST_F(PmixServerTest, OpenMpiAbortReachesTheLauncherWithItsCode) {
  ASSERT_EQ(compiled_ring_, 0);
  ManualExchange ex;
  PmixNamespace* ns = add(one_node("corral.1.1", 2), ex);
  ASSERT_NE(ns, nullptr);
  std::vector<Rank> ranks;
  for (uint32_t r = 0; r < 2; ++r) ranks.push_back(spawn(*ns, r, ring_program_, {"abort"}));
  // The launcher kills the step on the abort; here the test does.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu_);
      if (!aborts_.empty()) break;
    }
    std::this_thread::sleep_for(20ms);
  }
  for (auto& r : ranks) ::kill(r.pid, SIGKILL);
  wait_all(ranks);
  std::lock_guard lock(mu_);
  ASSERT_EQ(aborts_.size(), 1u);
  EXPECT_EQ(aborts_[0].rank, 1);
  EXPECT_EQ(aborts_[0].exit_code, 42);
}

// Two nodes, one of them elsewhere: the fence reaches the exchange with this agent's
// blob under its key, and the clients go on with what the exchange answers.
TEST_F(PmixServerTest, FenceAcrossAgentsGoesThroughTheExchange) {
  ASSERT_EQ(compiled_fence_, 0) << "cc could not build pmix_fence.c against libpmix (apt-get install libpmix-dev)";
  ManualExchange ex;
  PmixLayout l{"corral.2.0", {"n0", "n1"}, {{0, 1}, {2, 3}}, {0}, ::getuid(), ::getgid()};
  PmixNamespace* ns = add(l, ex);
  ASSERT_NE(ns, nullptr);
  std::vector<Rank> ranks;
  for (uint32_t r = 0; r < 2; ++r) ranks.push_back(spawn(*ns, r, fence_program_, {"get"}));
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(ex.mu);
      if (!ex.pending.empty()) break;
    }
    std::this_thread::sleep_for(20ms);
  }
  PmiKvs mine;
  PmiExchange::Done done;
  {
    std::lock_guard lock(ex.mu);
    ASSERT_EQ(ex.pending.size(), 1u) << "the library did not hand the fence to the agent";
    mine = ex.puts[0];
    done = std::move(ex.pending[0]);
  }
  ASSERT_EQ(mine.size(), 1u);
  ASSERT_EQ(mine.begin()->first, "pmix.n0");
  auto blob = job::base64url_decode(mine.begin()->second);
  ASSERT_TRUE(blob.ok());
  EXPECT_FALSE(blob->empty());
  // The other agent contributed nothing: everyone gets this agent's data back.
  loop_->post([done = std::move(done), mine] { done(mine); });
  wait_all(ranks);
  for (auto& r : ranks) EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(ranks[0].output.find("rank 0 of 4 in corral.2.0, local peers 0,1"), std::string::npos) << ranks[0].output;
  EXPECT_NE(ranks[0].output.find("rank 1 says from-1"), std::string::npos) << ranks[0].output;
  EXPECT_NE(ranks[1].output.find("rank 0 says from-0"), std::string::npos) << ranks[1].output;
  EXPECT_EQ(on_loop([&] { return ns->fences_completed(); }), 1u);
}

TEST_F(PmixServerTest, AFailedExchangeFailsTheFenceAndIsReported) {
  ASSERT_EQ(compiled_fence_, 0);
  ManualExchange ex;
  PmixLayout l{"corral.2.1", {"n0", "n1"}, {{0}, {1}}, {0}, ::getuid(), ::getgid()};
  PmixNamespace* ns = add(l, ex);
  ASSERT_NE(ns, nullptr);
  std::vector<Rank> ranks;
  ranks.push_back(spawn(*ns, 0, fence_program_));
  auto deadline = std::chrono::steady_clock::now() + 30s;
  PmiExchange::Done done;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    std::lock_guard lock(ex.mu);
    if (!ex.pending.empty()) done = std::move(ex.pending[0]);
  }
  ASSERT_TRUE(done);
  loop_->post([done = std::move(done)] { done(Error{Errc::unavailable, "node n1 went away"}); });
  wait_all(ranks);
  EXPECT_EQ(ranks[0].status, 3) << ranks[0].output;  // PMIx_Fence returned an error
  std::lock_guard lock(mu_);
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_NE(errors_[0].find("node n1 went away"), std::string::npos);
}

TEST_F(PmixServerTest, NamespacesAreOnePerStepAndRanksOnlyLocal) {
  ManualExchange ex;
  const std::size_t before = on_loop([&] { return server_->namespaces(); });
  PmixNamespace* ns = add(one_node("corral.4.0", 2), ex);
  ASSERT_NE(ns, nullptr);
  auto again = on_loop([&] { return server_->add(one_node("corral.4.0", 2), ex, callbacks()).message(); });
  EXPECT_NE(again.find("registered already"), std::string::npos) << again;
  auto env = on_loop([&] { return ns->task_env(7); });
  EXPECT_EQ(env.error().code, Errc::not_found);
  auto first = on_loop([&] { return ns->task_env(1); });
  ASSERT_TRUE(first.ok()) << first.message();
  bool has_namespace = false;
  for (const auto& kv : *first) has_namespace |= kv == "PMIX_NAMESPACE=corral.4.0";
  EXPECT_TRUE(has_namespace);
  auto second = on_loop([&] { return ns->task_env(1); });  // a start tried again
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(on_loop([&] { return server_->namespaces(); }), before + 1);
  auto bad = on_loop([&] { return server_->add(one_node("corral.4.1;rm", 1), ex, callbacks()).message(); });
  EXPECT_NE(bad.find("other than letters"), std::string::npos) << bad;
}

// The library lets a client in only as the user its rank was registered for. OpenPMIx
// 4.2's refusal leaves its state damaged (a later deregistration of that namespace never
// returns, and the heap suffers), which is why corral's namespace names cannot be
// guessed: so the refusal runs in a process of its own (a death test), with a server of
// its own, and ends with _exit.
int refusal_scenario(const fs::path& program, const fs::path& dir) {
  auto l = EventLoop::create();
  if (!l) return 10;
  auto server = PmixServer::start(**l, dir.string(), "n0");
  if (!server) return 11;
  std::thread loop_thread([&] { (*l)->run(); });
  ManualExchange ex;
  auto run_as = [&](PmixNamespace& ns, uid_t uid) {
    auto env = ns.task_env(0);
    if (!env) return -1;
    std::vector<std::string> all{"PATH=/usr/bin:/bin"};
    all.insert(all.end(), env->begin(), env->end());
    std::vector<char*> envp;
    for (auto& e : all) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string path = program.string();
    char* argv[] = {path.data(), nullptr};
    pid_t pid = ::fork();
    if (pid == 0) {
      if (uid != 0 && (::setgid(uid) != 0 || ::setuid(uid) != 0)) ::_exit(126);
      ::execve(argv[0], argv, envp.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  };
  PmixLayout mine{"corral.3.0.refused", {"n0"}, {{0}}, {0}, 4242, 4242};  // for another user than root
  auto refused = (*server)->add(mine, ex, {});
  if (!refused || run_as(**refused, 0) != 2) return 12;  // PMIx_Init failed
  PmixLayout other{"corral.3.1.served", {"n0"}, {{0}}, {0}, 0, 0};
  auto served = (*server)->add(other, ex, {});
  if (!served || run_as(**served, 0) != 0) return 13;  // other namespaces are still served
  std::_Exit(0);
}

TEST(PmixRefusal, AClientOfAnotherUserIsRefused) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run the client as another user than the registered one";
  const fs::path dir = fs::temp_directory_path() / ("corral-pmix-refusal-" + std::to_string(::getpid()));
  fs::create_directories(dir / "rendezvous");
  const fs::path program = dir / "pmix_fence";
  ASSERT_EQ(run_command({"sh", "-c",
                         "cc -o '" + program.string() + "' '" + (test_data_dir() / "mpi" / "pmix_fence.c").string() +
                             "' $(pkg-config --cflags --libs pmix)"}),
            0);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(refusal_scenario(program, dir / "rendezvous")), ::testing::ExitedWithCode(0), "");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace corral::node
