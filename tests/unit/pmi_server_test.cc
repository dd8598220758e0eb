// The PMI server: a fake client over the socketpair for every command and error path
// (PMI-1's and PMI-2's wire),
// then real MPICH programs (built with mpicc at test time) served by one or two servers.
#include "node/pmi/pmi_server.h"

#include "node/pmi/pmi_wire.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "test_programs.h"

extern char** environ;

namespace corral::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::run_command;
using test::test_data_dir;

// An exchange the test completes by hand, to see the barrier wait for it.
class ManualExchange final : public PmiExchange {
 public:
  void fence(PmiKvs local_puts, Done done) override {
    std::lock_guard lock(mu);
    fences.push_back(std::move(local_puts));
    pending = std::move(done);
  }
  std::mutex mu;
  std::vector<PmiKvs> fences;
  Done pending;
};

// The step manager's job in miniature: once every node fenced, all of them get the union.
class MergingExchange {
 public:
  explicit MergingExchange(std::size_t nodes) : nodes_(nodes) {
    for (std::size_t i = 0; i < nodes; ++i) members_.push_back(std::make_unique<Member>(*this));
  }
  PmiExchange& node(std::size_t i) { return *members_[i]; }
  int fences_completed = 0;

 private:
  struct Member final : PmiExchange {
    explicit Member(MergingExchange& owner) : owner_(owner) {}
    void fence(PmiKvs local_puts, Done done) override { owner_.arrive(std::move(local_puts), std::move(done)); }
    MergingExchange& owner_;
  };
  void arrive(PmiKvs puts, PmiExchange::Done done) {
    merged_.insert(puts.begin(), puts.end());
    waiting_.push_back(std::move(done));
    if (waiting_.size() < nodes_) return;
    auto waiting = std::move(waiting_);
    waiting_.clear();
    PmiKvs all = std::move(merged_);
    merged_.clear();
    ++fences_completed;
    for (auto& d : waiting) d(all);
  }
  std::size_t nodes_;
  std::vector<std::unique_ptr<Member>> members_;
  PmiKvs merged_;
  std::vector<PmiExchange::Done> waiting_;
};

class PmiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok()) << l.message();
    loop_ = std::move(*l);
  }
  void TearDown() override {
    stop_loop();
    servers_.clear();
  }

  PmiStep step(int size, std::string mapping = "") {
    PmiStep s;
    s.kvsname = "corral_7_0";
    s.size = size;
    s.process_mapping = std::move(mapping);
    return s;
  }
  PmiCallbacks callbacks() {
    PmiCallbacks cb;
    cb.on_abort = [this](const PmiAbort& a) {
      std::lock_guard lock(mu_);
      aborts_.push_back(a);
    };
    cb.on_error = [this](int rank, const std::string& msg) {
      std::lock_guard lock(mu_);
      errors_.emplace_back(rank, msg);
    };
    return cb;
  }
  // Creates a server (before the loop runs) and keeps the task ends of its ranks.
  PmiServer& add_server(PmiStep s, const std::vector<int>& ranks, PmiExchange& ex) {
    auto server = PmiServer::create(*loop_, ex, std::move(s), ranks, callbacks());
    EXPECT_TRUE(server.ok()) << server.message();
    for (int r : ranks) {
      auto end = (*server)->take_task_end(r);
      EXPECT_TRUE(end.ok()) << end.message();
      env_[r] = end->env;
      ends_[r] = std::move(end->fd);
    }
    servers_.push_back(std::move(*server));
    return *servers_.back();
  }
  void start_loop() {
    thread_ = std::thread([this] { loop_->run(); });
  }
  void stop_loop() {
    if (!thread_.joinable()) return;
    loop_->post([this] { loop_->stop(); });
    thread_.join();
  }
  template <class F>
  auto on_loop(F f) {
    std::promise<decltype(f())> p;
    auto fut = p.get_future();
    loop_->post([&] { p.set_value(f()); });
    return fut.get();
  }

  void send(int rank, const std::string& text) {
    ASSERT_EQ(::write(ends_[rank].get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  // Reads what `rank` was sent into its buffer, waiting until `deadline`: "" when something
  // came, "<timeout>" or "<eof>" otherwise.
  std::string read_more(int rank, std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{ends_[rank].get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "<timeout>";
    char tmp[4096];
    ssize_t n = ::read(ends_[rank].get(), tmp, sizeof tmp);
    if (n <= 0) return "<eof>";
    inbuf_[rank].append(tmp, static_cast<std::size_t>(n));
    return "";
  }
  // The next reply line of `rank` without '\n'; "<timeout>" or "<eof>" otherwise.
  std::string recv(int rank, int timeout_ms = 5000) {
    std::string& buf = inbuf_[rank];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (buf.find('\n') == std::string::npos)
      if (auto why = read_more(rank, deadline); !why.empty()) return why;
    auto nl = buf.find('\n');
    std::string line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    return line;
  }
  std::string call(int rank, const std::string& line) {
    send(rank, line + "\n");
    return recv(rank);
  }
  // PMI-2: the init line, then messages with their 6-character length.
  void init_v2(int rank) {
    ASSERT_EQ(call(rank, "cmd=init pmi_version=2 pmi_subversion=0"),
              "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
  }
  void send2(int rank, const std::string& message) {
    char len[8];
    std::snprintf(len, sizeof len, "%6d", static_cast<int>(message.size()));
    send(rank, len + message);
  }
  // The next PMI-2 message of `rank` without its length; "<timeout>" or "<eof>" otherwise.
  std::string recv2(int rank, int timeout_ms = 5000) {
    std::string& buf = inbuf_[rank];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (buf.size() >= 6) {
        const std::size_t n = std::stoul(buf.substr(0, 6));
        if (buf.size() >= 6 + n) {
          std::string msg = buf.substr(6, n);
          buf.erase(0, 6 + n);
          return msg;
        }
      }
      if (auto why = read_more(rank, deadline); !why.empty()) return why;
    }
  }
  std::string call2(int rank, const std::string& message) {
    send2(rank, message);
    return recv2(rank);
  }
  void wait_for(const std::function<bool()>& cond) {
    for (int i = 0; i < 500 && !cond(); ++i) std::this_thread::sleep_for(10ms);
  }
  std::vector<std::pair<int, std::string>> errors() {
    std::lock_guard lock(mu_);
    return errors_;
  }
  std::vector<PmiAbort> aborts() {
    std::lock_guard lock(mu_);
    return aborts_;
  }

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  std::vector<std::unique_ptr<PmiServer>> servers_;
  std::map<int, UniqueFd> ends_;
  std::map<int, std::vector<std::string>> env_;
  std::map<int, std::string> inbuf_;
  LocalPmiExchange local_;
  std::mutex mu_;
  std::vector<PmiAbort> aborts_;
  std::vector<std::pair<int, std::string>> errors_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- layout and setup -------------------------------------------------------------

TEST(PmiProcessMapping, BlockLayouts) {
  EXPECT_EQ(pmi_block_process_mapping({2, 2, 2, 2}), "(vector,(0,4,2))");
  EXPECT_EQ(pmi_block_process_mapping({4}), "(vector,(0,1,4))");
  EXPECT_EQ(pmi_block_process_mapping({3, 2, 2}), "(vector,(0,1,3),(1,2,2))");
  EXPECT_EQ(pmi_block_process_mapping({2, 2, 1, 1, 3}), "(vector,(0,2,2),(2,2,1),(4,1,3))");
  EXPECT_EQ(pmi_block_process_mapping({}), "");
}

TEST(PmiProcessMapping, CyclicLayoutsAreWrittenOnce) {
  EXPECT_EQ(pmi_process_mapping({0, 1, 0, 1, 0, 1}), "(vector,(0,2,1))");
  EXPECT_EQ(pmi_process_mapping({0, 1, 0}), "(vector,(0,2,1))");
  EXPECT_EQ(pmi_process_mapping({0, 0, 1, 1, 0, 0, 1, 1}), "(vector,(0,2,2))");
}

TEST(PmiProcessMapping, IrregularLayouts) {
  EXPECT_EQ(pmi_process_mapping({1, 0}), "(vector,(1,1,1),(0,1,1))");
  EXPECT_EQ(pmi_process_mapping({0, 0, 1, 2, 2, 2}), "(vector,(0,1,2),(1,1,1),(2,1,3))");
  // MPICH starts over at the first block once it runs out, so a repeat is left out.
  EXPECT_EQ(pmi_process_mapping({0, 0, 1, 0}), "(vector,(0,1,2),(1,1,1))");
  EXPECT_EQ(pmi_process_mapping({0, -1}), "");
}

TEST(PmiProcessMapping, TooLongForAValueIsOmitted) {
  std::vector<int> nodes;
  for (int i = 0; i < 400; ++i) nodes.push_back((i * 37) % 400);  // no run, no repeat
  EXPECT_EQ(pmi_process_mapping(nodes), "");
}

TEST(PmiTaskEnv, NamesFdRankAndSize) {
  EXPECT_EQ(pmi_task_env(3, 8, 11), (std::vector<std::string>{"PMI_FD=11", "PMI_RANK=3", "PMI_SIZE=8"}));
}

TEST_F(PmiServerTest, RejectsBadSteps) {
  EXPECT_FALSE(PmiServer::create(*loop_, local_, step(0), {0}, {}).ok());
  EXPECT_FALSE(PmiServer::create(*loop_, local_, step(2), {}, {}).ok());
  EXPECT_FALSE(PmiServer::create(*loop_, local_, step(2), {0, 2}, {}).ok());
  EXPECT_FALSE(PmiServer::create(*loop_, local_, step(2), {1, 1}, {}).ok());
  auto bad_name = step(1);
  bad_name.kvsname = "has space";
  auto r = PmiServer::create(*loop_, local_, bad_name, {0}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.message(), "kvsname")) << r.message();
}

TEST_F(PmiServerTest, TaskEndsAreHandedOutOnce) {
  auto server = PmiServer::create(*loop_, local_, step(4), {2, 3}, {});
  ASSERT_TRUE(server.ok());
  auto end = (*server)->take_task_end(2);
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(end->fd.valid());
  EXPECT_EQ(end->env, pmi_task_env(2, 4, end->fd.get()));
  EXPECT_EQ(::fcntl(end->fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ((*server)->take_task_end(2).error().code, Errc::not_found);
  EXPECT_EQ((*server)->take_task_end(0).error().code, Errc::not_found);
}

// ---- the commands ------------------------------------------------------------------

TEST_F(PmiServerTest, InitAndQueries) {
  add_server(step(4, "(vector,(0,2,2))"), {0, 1}, local_);
  start_loop();
  EXPECT_EQ(call(0, "cmd=init pmi_version=1 pmi_subversion=1"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  EXPECT_EQ(call(0, "cmd=get_maxes"), "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=512");
  EXPECT_EQ(call(0, "cmd=get_appnum"), "cmd=appnum rc=0 appnum=0");
  EXPECT_EQ(call(0, "cmd=get_my_kvsname"), "cmd=my_kvsname rc=0 kvsname=corral_7_0");
  EXPECT_EQ(call(0, "cmd=get_universe_size"), "cmd=universe_size rc=0 size=4");
  EXPECT_EQ(call(1, "cmd=get kvsname=corral_7_0 key=PMI_process_mapping"),
            "cmd=get_result rc=0 value=(vector,(0,2,2))");
  EXPECT_EQ(call(0, "cmd=finalize"), "cmd=finalize_ack rc=0");
}

TEST_F(PmiServerTest, InitServesVersionsOneAndTwo) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  std::string reply = call(0, "cmd=init pmi_version=3 pmi_subversion=0");
  EXPECT_TRUE(contains(reply, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1")) << reply;
  EXPECT_TRUE(contains(call(0, "cmd=init"), "rc=-1"));
  EXPECT_EQ(call(1, "cmd=init pmi_version=2 pmi_subversion=0"),
            "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
}

// ---- PMI-2 ----------------------------------------------------------------------

TEST(PmiWireV2, LengthsAndMessages) {
  EXPECT_EQ(pmi::parse_v2_length("    42"), 42u);
  EXPECT_EQ(pmi::parse_v2_length("000042"), 42u);
  EXPECT_EQ(pmi::parse_v2_length("42    "), 42u);  // Slurm's libpmi2 writes "%-6d"
  EXPECT_EQ(pmi::parse_v2_length(" 42   "), 42u);
  EXPECT_FALSE(pmi::parse_v2_length("42x   "));
  EXPECT_FALSE(pmi::parse_v2_length("  4 2 "));
  EXPECT_FALSE(pmi::parse_v2_length("      "));
  EXPECT_FALSE(pmi::parse_v2_length("12345"));
  auto cmd = pmi::parse_v2("cmd=kvs-put;key=a;value=x=y;thrid=0x1;");
  ASSERT_TRUE(cmd.ok()) << cmd.message();
  EXPECT_EQ(cmd->name, "kvs-put");
  EXPECT_EQ(*cmd->arg("value"), "x=y");
  EXPECT_EQ(*cmd->arg("thrid"), "0x1");
  EXPECT_FALSE(pmi::parse_v2("key=a;cmd=x;").ok());
  EXPECT_FALSE(pmi::parse_v2("cmd=a;k=1;k=2;").ok());
  EXPECT_FALSE(pmi::parse_v2("cmd=a;\n").ok());
  EXPECT_EQ(pmi::format_v2("kvs-get-response", {{"rc", "0"}, {"value", "a;b"}}),
            "    36cmd=kvs-get-response;rc=0;value=a,b;");
}

TEST_F(PmiServerTest, Pmi2FullinitAndQueriesCarryTheThreadId) {
  add_server(step(4, "(vector,(0,2,2))"), {0, 1}, local_);
  start_loop();
  init_v2(0);
  EXPECT_EQ(call2(0, "cmd=fullinit;pmirank=0;threaded=FALSE;thrid=0x7;"),
            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size=4;appnum=0;debugged=FALSE;"
            "pmiverbose=FALSE;thrid=0x7;");
  EXPECT_EQ(call2(0, "cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=corral_7_0;");
  EXPECT_EQ(call2(0, "cmd=info-getjobattr;key=PMI_process_mapping;"),
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,2));");
  EXPECT_EQ(call2(0, "cmd=info-getjobattr;key=nothing;"), "cmd=info-getjobattr-response;rc=0;found=FALSE;value=;");
  EXPECT_TRUE(contains(call2(0, "cmd=name-publish;name=a;port=b;"), "rc=-1"));
  EXPECT_EQ(call2(0, "cmd=finalize;"), "cmd=finalize-response;rc=0;");
  // A task speaks only for its own rank.
  init_v2(1);
  EXPECT_TRUE(contains(call2(1, "cmd=fullinit;pmirank=0;"), "rc=-1;errmsg=pmirank is not this task's rank 1"));
}

TEST_F(PmiServerTest, Pmi2PutsAreSharedAtTheFenceAcrossNodes) {
  MergingExchange ex(2);
  add_server(step(2), {0}, ex.node(0));
  add_server(step(2), {1}, ex.node(1));
  start_loop();
  for (int r : {0, 1}) {
    init_v2(r);
    EXPECT_TRUE(contains(call2(r, "cmd=fullinit;pmirank=" + std::to_string(r) + ";"), "rc=0"));
    EXPECT_EQ(call2(r, "cmd=kvs-put;key=card-" + std::to_string(r) + ";value=tcp://" + std::to_string(r) + ";"),
              "cmd=kvs-put-response;rc=0;");
  }
  send2(0, "cmd=kvs-fence;thrid=0xa;");
  EXPECT_EQ(recv2(0, 200), "<timeout>");  // node 1 has not fenced
  send2(1, "cmd=kvs-fence;");
  EXPECT_EQ(recv2(0), "cmd=kvs-fence-response;rc=0;thrid=0xa;");
  EXPECT_EQ(recv2(1), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(call2(0, "cmd=kvs-get;jobid=corral_7_0;srcid=1;key=card-1;"),
            "cmd=kvs-get-response;rc=0;found=TRUE;value=tcp://1;");
  EXPECT_EQ(call2(1, "cmd=kvs-get;key=nothing;"), "cmd=kvs-get-response;rc=0;found=FALSE;value=;");
}

// PMI-2 clients size values by pmi2.h's PMI2_MAX_VALLEN (1024), not PMI-1's 512.
TEST_F(PmiServerTest, Pmi2ValuesMayBeLongerThanPmi1Ones) {
  add_server(step(1), {0}, local_);
  start_loop();
  init_v2(0);
  EXPECT_TRUE(contains(call2(0, "cmd=fullinit;pmirank=0;"), "rc=0"));
  std::string longest(pmi::kV2ValueMax, 'v');
  EXPECT_EQ(call2(0, "cmd=kvs-put;key=k;value=" + longest + ";"), "cmd=kvs-put-response;rc=0;");
  EXPECT_TRUE(contains(call2(0, "cmd=kvs-put;key=k;value=" + longest + "v;"), "rc=-1;errmsg=value is longer than"));
}

TEST_F(PmiServerTest, Pmi2NodeAttributesWaitForTheirPut) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  init_v2(0);
  init_v2(1);
  EXPECT_EQ(call2(0, "cmd=info-getnodeattr;key=shm;"), "cmd=info-getnodeattr-response;rc=0;found=FALSE;");
  send2(0, "cmd=info-getnodeattr;key=shm;wait=TRUE;thrid=0x1;");
  EXPECT_EQ(recv2(0, 200), "<timeout>");
  EXPECT_EQ(call2(1, "cmd=info-putnodeattr;key=shm;value=/dev/shm/x;"), "cmd=info-putnodeattr-response;rc=0;");
  EXPECT_EQ(recv2(0), "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;thrid=0x1;");
}

TEST_F(PmiServerTest, Pmi2AbortAndBrokenMessages) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  init_v2(0);
  send2(0, "cmd=abort;exitcode=3;message=out of cheese;");
  EXPECT_EQ(recv2(0), "<eof>");
  wait_for([&] { return !aborts().empty(); });
  ASSERT_EQ(aborts().size(), 1u);
  EXPECT_EQ(aborts()[0].rank, 0);
  EXPECT_EQ(aborts()[0].exit_code, 3);
  EXPECT_EQ(aborts()[0].message, "out of cheese");
  init_v2(1);
  send(1, "notalengthcmd=x;");
  EXPECT_EQ(recv2(1), "<eof>");
}

TEST_F(PmiServerTest, Pmi2MessageLongerThanTheLimitClosesTheConnection) {
  add_server(step(1), {0}, local_);
  start_loop();
  init_v2(0);
  send(0, "999999cmd=kvs-put;key=a;value=");  // announces ~1 MB: nothing is buffered for it
  EXPECT_EQ(recv2(0), "<eof>");
  wait_for([&] { return !errors().empty(); });
  ASSERT_FALSE(errors().empty());
  EXPECT_TRUE(contains(errors()[0].second, "longer than 4096 bytes")) << errors()[0].second;
}

TEST_F(PmiServerTest, PutsAreSharedAtTheBarrier) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  EXPECT_EQ(call(0, "cmd=put kvsname=corral_7_0 key=card-0 value=tcp://a=b"), "cmd=put_result rc=0");
  send(0, "cmd=barrier_in\n");
  EXPECT_EQ(recv(0, 200), "<timeout>");  // rank 1 is not there yet
  send(1, "cmd=barrier_in\n");
  EXPECT_EQ(recv(0), "cmd=barrier_out rc=0");
  EXPECT_EQ(recv(1), "cmd=barrier_out rc=0");
  EXPECT_EQ(call(1, "cmd=get kvsname=corral_7_0 key=card-0"), "cmd=get_result rc=0 value=tcp://a=b");
  EXPECT_EQ(on_loop([&] { return servers_[0]->barriers_completed(); }), 1u);
}

TEST_F(PmiServerTest, BarrierWaitsForTheExchange) {
  ManualExchange ex;
  add_server(step(3), {0, 1}, ex);
  start_loop();
  EXPECT_EQ(call(0, "cmd=put key=a value=1"), "cmd=put_result rc=0");
  send(0, "cmd=barrier_in\n");
  send(1, "cmd=barrier_in\n");
  EXPECT_EQ(recv(0, 200), "<timeout>");
  {
    std::lock_guard lock(ex.mu);
    ASSERT_EQ(ex.fences.size(), 1u);
    EXPECT_EQ(ex.fences[0], (PmiKvs{{"a", "1"}}));
  }
  // The remote node's rank 2 put "b"; done arrives later, from the loop.
  loop_->post([&] { ex.pending(PmiKvs{{"a", "1"}, {"b", "2"}}); });
  EXPECT_EQ(recv(0), "cmd=barrier_out rc=0");
  EXPECT_EQ(recv(1), "cmd=barrier_out rc=0");
  EXPECT_EQ(call(1, "cmd=get key=b"), "cmd=get_result rc=0 value=2");
  // The next barrier hands over only the puts made since.
  EXPECT_EQ(call(1, "cmd=put key=c value=3"), "cmd=put_result rc=0");
  send(0, "cmd=barrier_in\n");
  send(1, "cmd=barrier_in\n");
  wait_for([&] {
    std::lock_guard lock(ex.mu);
    return ex.fences.size() == 2;
  });
  std::lock_guard lock(ex.mu);
  ASSERT_EQ(ex.fences.size(), 2u);
  EXPECT_EQ(ex.fences[1], (PmiKvs{{"c", "3"}}));
}

TEST_F(PmiServerTest, FailedExchangeClosesEveryConnection) {
  ManualExchange ex;
  add_server(step(2), {0, 1}, ex);
  start_loop();
  send(0, "cmd=barrier_in\n");
  send(1, "cmd=barrier_in\n");
  wait_for([&] {
    std::lock_guard lock(ex.mu);
    return ex.pending != nullptr;
  });
  loop_->post([&] { ex.pending(Error{Errc::unavailable, "node n2 went away"}); });
  EXPECT_EQ(recv(0), "<eof>");
  EXPECT_EQ(recv(1), "<eof>");
  wait_for([&] { return !errors().empty(); });
  auto errs = errors();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].first, -1);
  EXPECT_TRUE(contains(errs[0].second, "node n2 went away")) << errs[0].second;
}

TEST_F(PmiServerTest, GetOfAMissingKeyIsAnError) {
  add_server(step(1), {0}, local_);
  start_loop();
  std::string reply = call(0, "cmd=get kvsname=corral_7_0 key=nope");
  EXPECT_TRUE(contains(reply, "cmd=get_result rc=-1 msg=")) << reply;
  EXPECT_TRUE(contains(reply, "nope")) << reply;
  EXPECT_TRUE(contains(call(0, "cmd=get kvsname=other key=PMI_process_mapping"), "rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=get"), "rc=-1"));
}

TEST_F(PmiServerTest, PutEnforcesTheAnnouncedLimits) {
  add_server(step(1), {0}, local_);
  start_loop();
  std::string key64(64, 'k'), key65(65, 'k'), longest(pmi::kValueMax, 'v'), too_long(pmi::kValueMax + 1, 'v');
  EXPECT_EQ(call(0, "cmd=put key=" + key64 + " value=" + longest), "cmd=put_result rc=0");
  std::string reply = call(0, "cmd=put key=" + key65 + " value=x");
  EXPECT_TRUE(contains(reply, "rc=-1") && contains(reply, "keylen_max")) << reply;
  reply = call(0, "cmd=put key=k value=" + too_long);
  EXPECT_TRUE(contains(reply, "rc=-1") && contains(reply, "vallen_max")) << reply;
  EXPECT_TRUE(contains(call(0, "cmd=put kvsname=wrong key=k value=v"), "rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=put key=k"), "rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=put value=v"), "rc=-1"));
  EXPECT_EQ(call(0, "cmd=get key=" + key64), "cmd=get_result rc=0 value=" + longest);
  EXPECT_TRUE(errors().empty());
}

TEST_F(PmiServerTest, PutsHaveABudgetPerRank) {
  add_server(step(1), {0}, local_);
  start_loop();
  std::string value(500, 'v');
  std::string last;
  for (int i = 0; i < 10000 && !contains(last, "rc=-1"); ++i)
    last = call(0, "cmd=put key=k" + std::to_string(i) + " value=" + value);
  EXPECT_TRUE(contains(last, "rc=-1")) << last;
  EXPECT_EQ(call(0, "cmd=get_appnum"), "cmd=appnum rc=0 appnum=0");
}

TEST_F(PmiServerTest, MalformedAndUnknownCommandsGetErrorReplies) {
  add_server(step(1), {0}, local_);
  start_loop();
  std::string reply = call(0, "garbage");
  EXPECT_TRUE(contains(reply, "cmd=error rc=-1 msg=malformed_PMI_command")) << reply;
  reply = call(0, "cmd=frobnicate");
  EXPECT_TRUE(contains(reply, "cmd=error rc=-1")) << reply;
  EXPECT_TRUE(contains(reply, "frobnicate")) << reply;
  EXPECT_TRUE(contains(call(0, "cmd=publish_name service=s port=p"), "cmd=publish_result rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=unpublish_name service=s"), "cmd=unpublish_result rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=lookup_name service=s"), "cmd=lookup_result rc=-1"));
  EXPECT_TRUE(contains(call(0, "cmd=spawn nprocs=2"), "cmd=spawn_result rc=-1"));
  // The connection is still good.
  EXPECT_EQ(call(0, "cmd=get_appnum"), "cmd=appnum rc=0 appnum=0");
  EXPECT_TRUE(errors().empty());
}

TEST_F(PmiServerTest, MultiLineSpawnIsRejectedAfterItsEnd) {
  add_server(step(1), {0}, local_);
  start_loop();
  send(0, "mcmd=spawn\nnprocs=2\nexecname=/bin/true\n");
  EXPECT_EQ(recv(0, 200), "<timeout>");  // nothing until endcmd
  send(0, "argcnt=0\nendcmd\n");
  std::string reply = recv(0);
  EXPECT_TRUE(contains(reply, "cmd=spawn_result rc=-1")) << reply;
  EXPECT_EQ(call(0, "cmd=get_appnum"), "cmd=appnum rc=0 appnum=0");
}

TEST_F(PmiServerTest, PartialAndBatchedLines) {
  add_server(step(1), {0}, local_);
  start_loop();
  send(0, "cmd=get_");
  EXPECT_EQ(recv(0, 100), "<timeout>");
  send(0, "appnum\ncmd=get_my_kvs");
  EXPECT_EQ(recv(0), "cmd=appnum rc=0 appnum=0");
  send(0, "name\ncmd=get_universe_size\n");
  EXPECT_EQ(recv(0), "cmd=my_kvsname rc=0 kvsname=corral_7_0");
  EXPECT_EQ(recv(0), "cmd=universe_size rc=0 size=1");
}

TEST_F(PmiServerTest, OverlongLineClosesTheConnection) {
  add_server(step(1), {0}, local_);
  start_loop();
  send(0, "cmd=put key=k value=" + std::string(pmi::kLineMax + 10, 'x'));
  EXPECT_EQ(recv(0), "<eof>");
  wait_for([&] { return !errors().empty(); });
  auto errs = errors();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].first, 0);
  EXPECT_TRUE(contains(errs[0].second, "longer than")) << errs[0].second;
}

TEST_F(PmiServerTest, OverlongLineInOneWriteClosesTheConnection) {
  add_server(step(1), {0}, local_);
  start_loop();
  send(0, "cmd=put key=k value=" + std::string(pmi::kLineMax + 10, 'x') + "\n");
  EXPECT_EQ(recv(0), "<eof>");
}

TEST_F(PmiServerTest, AbortIsReportedAndClosesTheConnection) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  call(1, "cmd=init pmi_version=1 pmi_subversion=1");
  send(1, "cmd=abort exitcode=42 message=out of cheese\n");
  EXPECT_EQ(recv(1), "<eof>");
  wait_for([&] { return !aborts().empty(); });
  auto a = aborts();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].rank, 1);
  EXPECT_EQ(a[0].exit_code, 42);
  EXPECT_EQ(a[0].message, "out of cheese");
  EXPECT_TRUE(errors().empty());
  // Without an exit code, the task aborts with 1.
  send(0, "cmd=abort\n");
  wait_for([&] { return aborts().size() == 2; });
  ASSERT_EQ(aborts().size(), 2u);
  EXPECT_EQ(aborts()[1].exit_code, 1);
  EXPECT_TRUE(on_loop([&] { return servers_[0]->all_done(); }));
}

TEST_F(PmiServerTest, ClosingWithoutFinalizeIsAnErrorOnlyAfterInit) {
  add_server(step(3), {0, 1, 2}, local_);
  start_loop();
  call(0, "cmd=init pmi_version=1 pmi_subversion=1");
  ends_[0].reset();  // a crash after init
  ends_[1].reset();  // a program that never spoke PMI
  EXPECT_EQ(call(2, "cmd=finalize"), "cmd=finalize_ack rc=0");
  ends_[2].reset();
  wait_for([&] { return on_loop([&] { return servers_[0]->all_done(); }); });
  EXPECT_TRUE(on_loop([&] { return servers_[0]->all_done(); }));
  auto errs = errors();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].first, 0);
  EXPECT_TRUE(contains(errs[0].second, "without PMI_Finalize")) << errs[0].second;
}

TEST_F(PmiServerTest, EnteringABarrierTwiceClosesTheConnection) {
  add_server(step(2), {0, 1}, local_);
  start_loop();
  send(0, "cmd=barrier_in\ncmd=barrier_in\n");
  EXPECT_EQ(recv(0), "<eof>");
  wait_for([&] { return !errors().empty(); });
  ASSERT_EQ(errors().size(), 1u);
  EXPECT_EQ(errors()[0].first, 0);
}

TEST_F(PmiServerTest, CallbacksMayDestroyTheServer) {
  PmiCallbacks cb;
  cb.on_abort = [this](const PmiAbort&) { servers_.clear(); };
  auto server = PmiServer::create(*loop_, local_, step(1), {0}, cb);
  ASSERT_TRUE(server.ok());
  ends_[0] = std::move((*server)->take_task_end(0)->fd);
  servers_.push_back(std::move(*server));
  start_loop();
  send(0, "cmd=abort exitcode=3\n");
  EXPECT_EQ(recv(0), "<eof>");
  wait_for([&] { return on_loop([&] { return servers_.empty(); }); });
  EXPECT_TRUE(on_loop([&] { return servers_.empty(); }));
}

// ---- real MPICH ----------------------------------------------------------------------

struct RankProcess {
  int rank = -1;
  pid_t pid = -1;
  UniqueFd out;  // stdout, read after exit
  int status = -1;
  std::string output;
};

class PmiMpichTest : public PmiServerTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("corral-pmi-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    program_ = dir_ / "pmi_ring";
    auto source = test_data_dir() / "mpi" / "pmi_ring.c";
    compiled_ = run_command({"mpicc.mpich", "-o", program_.string(), source.string()});
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    PmiServerTest::SetUp();
    ASSERT_NE(compiled_, -1) << "mpicc.mpich was not found: the PMI tests need MPICH's compiler wrapper; "
                                "install it with `apt-get install libmpich-dev mpich`";
    ASSERT_EQ(compiled_, 0) << "mpicc.mpich could not build " << (test_data_dir() / "mpi" / "pmi_ring.c");
  }

  // fork+exec of one rank with its PMI end kept open across exec (it is close-on-exec in
  // the agent so that other children never inherit it).
  RankProcess spawn_rank(int rank, const std::vector<std::string>& args) {
    RankProcess p;
    p.rank = rank;
    int pipefd[2];
    EXPECT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
    p.out.reset(pipefd[0]);
    UniqueFd write_end(pipefd[1]);
    // Everything the child needs is built before fork: the loop thread is running.
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "PMI_", 4) != 0 && std::strncmp(*e, "PMIX_", 5) != 0) env.emplace_back(*e);
    for (const auto& kv : env_[rank]) env.push_back(kv);
    std::vector<char*> envp, argv;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string path = program_.string();
    argv.push_back(path.data());
    std::vector<std::string> extra = args;
    for (auto& a : extra) argv.push_back(a.data());
    argv.push_back(nullptr);
    int pmi_fd = ends_[rank].get();
    p.pid = ::fork();
    if (p.pid == 0) {
      ::fcntl(pmi_fd, F_SETFD, 0);
      ::dup2(write_end.get(), STDOUT_FILENO);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ends_[rank].reset();  // the agent closes the task's end once the task has it
    return p;
  }

  // Waits for every rank (killing them all after `timeout`), then collects the output.
  void wait_all(std::vector<RankProcess>& procs, std::chrono::seconds timeout = 60s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t left = procs.size();
    while (left > 0) {
      for (auto& p : procs) {
        if (p.status != -1) continue;
        int status = 0;
        if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
          p.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --left;
        }
      }
      if (std::chrono::steady_clock::now() > deadline || !aborts().empty()) {
        for (auto& p : procs)
          if (p.status == -1) ::kill(p.pid, SIGKILL);
      }
      std::this_thread::sleep_for(10ms);
    }
    for (auto& p : procs) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(p.out.get(), buf, sizeof buf)) > 0) p.output.append(buf, static_cast<std::size_t>(n));
    }
  }

  void expect_ring_ok(const std::vector<RankProcess>& procs, int size) {
    for (const auto& p : procs) {
      EXPECT_EQ(p.status, 0) << "rank " << p.rank << " output:\n" << p.output;
      EXPECT_TRUE(contains(p.output, "rank " + std::to_string(p.rank) + " of " + std::to_string(size)))
          << "rank " << p.rank << " printed:\n"
          << p.output;
      if (p.rank == 0) {
        EXPECT_TRUE(contains(p.output, "ring and allreduce ok")) << p.output;
      }
    }
    EXPECT_TRUE(errors().empty()) << errors()[0].second;
    EXPECT_TRUE(aborts().empty());
  }

  static inline fs::path dir_;
  static inline fs::path program_;
  static inline int compiled_ = -1;
};

// MPICH 4.0 in Debian is built for ch4:ucx. No interface has to be chosen here: UCX
// recognises that every rank runs on this host and uses shared memory, also between the
// ranks the process mapping puts on different "nodes", so loopback-only containers work.

TEST_F(PmiMpichTest, FourRanksOnOneNode) {
  add_server(step(4, pmi_block_process_mapping({4})), {0, 1, 2, 3}, local_);
  start_loop();
  std::vector<RankProcess> procs;
  for (int r = 0; r < 4; ++r) procs.push_back(spawn_rank(r, {}));
  wait_all(procs);
  expect_ring_ok(procs, 4);
  EXPECT_TRUE(on_loop([&] { return servers_[0]->all_done(); }));
  EXPECT_GE(on_loop([&] { return servers_[0]->barriers_completed(); }), 2u);
}

TEST_F(PmiMpichTest, TwoNodesJoinedByAnExchange) {
  MergingExchange exchange(2);
  auto step4 = step(4, pmi_block_process_mapping({2, 2}));
  add_server(step4, {0, 1}, exchange.node(0));
  add_server(step4, {2, 3}, exchange.node(1));
  start_loop();
  std::vector<RankProcess> procs;
  for (int r = 0; r < 4; ++r) procs.push_back(spawn_rank(r, {}));
  wait_all(procs);
  expect_ring_ok(procs, 4);
  EXPECT_TRUE(on_loop([&] { return servers_[0]->all_done() && servers_[1]->all_done(); }));
  EXPECT_GE(on_loop([&] { return exchange.fences_completed; }), 2);
}

TEST_F(PmiMpichTest, WithoutProcessMappingMpichFindsNodesItself) {
  add_server(step(3), {0, 1, 2}, local_);
  start_loop();
  std::vector<RankProcess> procs;
  for (int r = 0; r < 3; ++r) procs.push_back(spawn_rank(r, {}));
  wait_all(procs);
  expect_ring_ok(procs, 3);
}

TEST_F(PmiMpichTest, MpiAbortReachesTheCallback) {
  add_server(step(2, pmi_block_process_mapping({2})), {0, 1}, local_);
  start_loop();
  std::vector<RankProcess> procs;
  for (int r = 0; r < 2; ++r) procs.push_back(spawn_rank(r, {"abort"}));
  wait_all(procs);  // kills the rest once the abort is reported, as the launcher would
  auto a = aborts();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].rank, 1);
  EXPECT_EQ(a[0].exit_code, 42);
  EXPECT_NE(procs[1].status, 0);
}

}  // namespace
}  // namespace corral::node
