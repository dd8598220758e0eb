// StepClient against in-process fake step managers on a Unix socket, over both transports
// (gRPC, and the agent's own step protocol of net/step_frames.h): the RunStep conversation
// (create, waiting, created, output, a signal from another thread, exit), refusals,
// ListSteps, and the message when nobody listens.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/client/step_client.h"
#include "common.pb.h"
#include "net/step_frames.h"
#include "steps.grpc.pb.h"
#include "temp_dir.h"
#include "util/unique_fd.h"

namespace corral::cli {
namespace {

namespace pb = corral::v1;

class FakeStepManager final : public pb::StepService::Service {
 public:
  grpc::Status RunStep(grpc::ServerContext*,
                       grpc::ServerReaderWriter<pb::StepServerMessage, pb::StepClientMessage>* stream) override {
    pb::StepClientMessage first;
    if (!stream->Read(&first) || !first.has_create())
      return {grpc::StatusCode::INVALID_ARGUMENT, "the first message must carry create"};
    if (first.create().argv_size() == 0) return {grpc::StatusCode::INVALID_ARGUMENT, "the step has no command"};
    pb::StepServerMessage waiting;
    waiting.set_waiting("running steps hold the cores");
    stream->Write(waiting);
    pb::StepServerMessage created;
    created.mutable_created()->set_stepid(3);
    created.mutable_created()->set_nodelist("node0");
    created.mutable_created()->set_ntasks(1);
    stream->Write(created);
    pb::StepServerMessage out;
    auto* o = out.add_output();
    o->set_jobid(first.create().jobid());
    o->set_data("hello " + first.create().argv(0) + "\n");
    stream->Write(out);
    // Echo stdin back as output until a signal comes; the signal ends the task.
    pb::StepClientMessage msg;
    int signal = 0;
    std::string input;
    while (signal == 0 && stream->Read(&msg)) {
      input += msg.stdin();
      signal = msg.signal();
    }
    pb::StepServerMessage echo;
    echo.add_output()->set_data("stdin: " + input + "\n");
    stream->Write(echo);
    pb::StepServerMessage exit;
    exit.mutable_exit()->set_waitstatus(signal);
    exit.mutable_exit()->set_state("CANCELED");
    exit.mutable_exit()->add_tasks()->set_waitstatus(signal);
    stream->Write(exit);
    return grpc::Status::OK;
  }

  grpc::Status ListSteps(grpc::ServerContext*, const pb::ListStepsRequest* req, pb::ListStepsReply* reply) override {
    if (req->jobid() == 99) return {grpc::StatusCode::PERMISSION_DENIED, "job 99 belongs to bob"};
    auto* s = reply->add_steps();
    s->set_jobid(req->jobid());
    s->set_step("0");
    s->set_state("RUNNING");
    return grpc::Status::OK;
  }
};

// The same conversation in the agent's own step protocol: one connection at a time, on a
// thread, with blocking reads and writes.
class FakeSocketStepManager {
 public:
  explicit FakeSocketStepManager(const std::string& path) {
    listen_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_.get(), 8), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeSocketStepManager() {
    ::shutdown(listen_.get(), SHUT_RDWR);
    thread_.join();
  }
  // Answers the next connection with `garbage` instead of the protocol.
  void answer_with(std::string garbage) { garbage_ = std::move(garbage); }
  // After each call, waits for the client's next one on the connection and closes it
  // unanswered: an agent that closes a kept connection just as the client takes it.
  void close_on_next_call() { close_on_next_ = true; }

 private:
  void serve() {
    for (;;) {
      UniqueFd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) return;
      if (!garbage_.empty()) {  // as gRPC would: its own preface, then it waits for the client
        (void)!::write(c.get(), garbage_.data(), garbage_.size());
        char buf[4096];
        while (::read(c.get(), buf, sizeof buf) > 0) {}
        continue;
      }
      converse(c.get());
      if (close_on_next_) {
        char buf[4096];
        (void)!::read(c.get(), buf, sizeof buf);
      }
    }
  }
  bool next(int fd, pb::StepClientMessage& msg) {
    for (;;) {
      auto f = reader_.next();
      if (!f || (*f && (*f)->type != net::kStepFrameMessage)) return false;
      if (*f) return msg.ParseFromString((*f)->payload);
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return false;
      reader_.feed({buf, static_cast<size_t>(n)});
    }
  }
  static void put(int fd, const pb::StepServerMessage& m) {
    std::string out;
    net::append_step_frame(out, net::kStepFrameMessage, m.SerializeAsString());
    EXPECT_EQ(::write(fd, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  }
  static void end(int fd, int code, const std::string& why) {
    std::string out;
    net::append_step_frame(out, net::kStepFrameStatus, net::step_status_payload(code, why));
    EXPECT_EQ(::write(fd, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  }
  void converse(int fd) {
    char preface[net::kStepPreface.size()];
    ASSERT_EQ(::read(fd, preface, sizeof preface), static_cast<ssize_t>(sizeof preface));
    ASSERT_EQ(std::string_view(preface, sizeof preface), net::kStepPreface);
    reader_ = net::StepFrameReader(1 << 20);
    pb::StepClientMessage first;
    if (!next(fd, first) || !first.has_create()) return end(fd, 3, "the first message must carry create");
    if (first.create().argv_size() == 0) return end(fd, 3, "the step has no command");
    pb::StepServerMessage waiting;
    waiting.set_waiting("running steps hold the cores");
    put(fd, waiting);
    pb::StepServerMessage created;
    created.mutable_created()->set_stepid(3);
    created.mutable_created()->set_nodelist("node0");
    created.mutable_created()->set_ntasks(1);
    put(fd, created);
    pb::StepServerMessage out;
    auto* o = out.add_output();
    o->set_jobid(first.create().jobid());
    o->set_data("hello " + first.create().argv(0) + "\n");
    put(fd, out);
    pb::StepClientMessage msg;
    int signal = 0;
    std::string input;
    while (signal == 0 && next(fd, msg)) {
      input += msg.stdin();
      signal = msg.signal();
    }
    pb::StepServerMessage echo;
    echo.add_output()->set_data("stdin: " + input + "\n");
    put(fd, echo);
    pb::StepServerMessage exit;
    exit.mutable_exit()->set_waitstatus(signal);
    exit.mutable_exit()->set_state("CANCELED");
    exit.mutable_exit()->add_tasks()->set_waitstatus(signal);
    put(fd, exit);
    end(fd, 0, "");
  }

  UniqueFd listen_;
  std::thread thread_;
  net::StepFrameReader reader_{1 << 20};
  std::string garbage_;
  std::atomic<bool> close_on_next_{false};
};

// gRPC's RunStep (CORRAL_STEP_TRANSPORT=grpc) or the agent's own protocol (the default on
// a Unix socket).
class StepClientTest : public ::testing::TestWithParam<bool> {
 protected:
  bool grpc() const { return GetParam(); }
  void SetUp() override {
    address_ = "unix:" + (dir_.path() / "step.sock").string();
    if (grpc()) {
      ::setenv("CORRAL_STEP_TRANSPORT", "grpc", 1);
      grpc::ServerBuilder builder;
      builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
      builder.RegisterService(&service_);
      server_ = builder.BuildAndStart();
      ASSERT_NE(server_, nullptr);
    } else {
      ::unsetenv("CORRAL_STEP_TRANSPORT");
      socket_ = std::make_unique<FakeSocketStepManager>(address_.substr(5));
    }
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    socket_.reset();
    ::unsetenv("CORRAL_STEP_TRANSPORT");
  }

  test::TempDir dir_;
  std::string address_;
  FakeStepManager service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<FakeSocketStepManager> socket_;
};

INSTANTIATE_TEST_SUITE_P(Transports, StepClientTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Grpc" : "Socket"; });

TEST_P(StepClientTest, RunsAStepAndSendsStdinAndSignalsFromOtherThreads) {
  StepClient client(address_, 42);
  pb::StepSpec spec;
  spec.set_jobid(42);
  spec.add_argv("world");
  auto stream = client.run(spec);
  ASSERT_TRUE(stream.ok()) << stream.message();
  pb::StepServerMessage msg;
  ASSERT_TRUE((*stream)->read(msg));
  EXPECT_EQ(msg.waiting(), "running steps hold the cores");
  ASSERT_TRUE((*stream)->read(msg));
  ASSERT_TRUE(msg.has_created());
  EXPECT_EQ(msg.created().stepid(), 3u);
  ASSERT_TRUE((*stream)->read(msg));
  ASSERT_EQ(msg.output_size(), 1);
  EXPECT_EQ(msg.output(0).data(), "hello world\n");
  EXPECT_EQ(msg.output(0).jobid(), 42u);

  std::thread writer([&] {
    EXPECT_TRUE((*stream)->send_stdin("abc"));
    EXPECT_TRUE((*stream)->send_stdin("def"));
    EXPECT_TRUE((*stream)->send_signal(SIGINT));
  });
  ASSERT_TRUE((*stream)->read(msg));
  writer.join();
  ASSERT_EQ(msg.output_size(), 1);
  EXPECT_EQ(msg.output(0).data(), "stdin: abcdef\n");
  ASSERT_TRUE((*stream)->read(msg));
  ASSERT_TRUE(msg.has_exit());
  EXPECT_EQ(msg.exit().waitstatus(), SIGINT);
  (*stream)->close_writes();
  EXPECT_FALSE((*stream)->send_signal(SIGKILL));  // closed: refused here, not sent
  EXPECT_FALSE((*stream)->read(msg));
  EXPECT_TRUE((*stream)->finish().ok());
}

// One client shared by many threads (the benchmark's callers do this): each call gets its
// own stream, the gRPC channel is made once.
TEST_P(StepClientTest, CallsFromManyThreadsShareOneClient) {
  StepClient client(address_, 42);
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto stream = client.run(pb::StepSpec{});  // no argv: refused at once, by both fakes
      if (!stream.ok()) return;
      pb::StepServerMessage msg;
      while ((*stream)->read(msg)) {}
      if ((*stream)->finish().message() == "the step has no command") ++refused;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused.load(), 8);
}

TEST(StepClientSocket, ACallOnAKeptConnectionTheAgentClosesGoesAgainOverANewOne) {
  test::TempDir dir;
  const std::string path = (dir.path() / "step.sock").string();
  FakeSocketStepManager agent(path);
  agent.close_on_next_call();
  StepClient client("unix:" + path, 42);
  for (int call = 0; call < 3; ++call) {  // the second and third find their kept connection closed
    auto stream = client.run(pb::StepSpec{});  // no argv: refused
    ASSERT_TRUE(stream.ok()) << stream.message();
    pb::StepServerMessage msg;
    EXPECT_FALSE((*stream)->read(msg));
    EXPECT_EQ((*stream)->finish().message(), "the step has no command") << "call " << call;
  }
}

TEST_P(StepClientTest, ReportsTheStepManagersRefusalInItsOwnWords) {
  StepClient client(address_, 42);
  auto stream = client.run(pb::StepSpec{});  // no argv
  ASSERT_TRUE(stream.ok()) << stream.message();
  pb::StepServerMessage msg;
  EXPECT_FALSE((*stream)->read(msg));
  Status st = (*stream)->finish();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "the step has no command");
}

// ListSteps is gRPC's on every socket.
class StepClientListTest : public StepClientTest {};
INSTANTIATE_TEST_SUITE_P(Grpc, StepClientListTest, ::testing::Values(true));

TEST_P(StepClientListTest, ListsSteps) {
  StepClient client(address_, 42);
  auto reply = client.list_steps(42);
  ASSERT_TRUE(reply.ok()) << reply.message();
  ASSERT_EQ(reply->steps_size(), 1);
  EXPECT_EQ(reply->steps(0).state(), "RUNNING");
  auto denied = client.list_steps(99);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, Errc::permission_denied);
  EXPECT_EQ(denied.message(), "job 99 belongs to bob");
}

TEST(StepClientSocket, SaysWhenTheStepManagerDoesNotSpeakTheProtocol) {
  test::TempDir dir;
  const std::string path = (dir.path() / "old.sock").string();
  FakeSocketStepManager old(path);
  old.answer_with(std::string("\0\0\x12\x04\0\0\0\0\0", 9));  // an HTTP/2 SETTINGS frame
  StepClient client("unix:" + path, 42);
  pb::StepSpec spec;
  spec.add_argv("true");
  auto stream = client.run(spec);
  ASSERT_TRUE(stream.ok()) << stream.message();
  pb::StepServerMessage msg;
  EXPECT_FALSE((*stream)->read(msg));
  const Status st = (*stream)->finish();
  EXPECT_NE(st.message().find("does not answer in corral's step protocol (an older corral-node?)"), std::string::npos)
      << st.message();
}

TEST(StepClientUnreachable, SaysWhichStepManagerCannotBeReached) {
  test::TempDir dir;
  const std::string address = "unix:" + (dir.path() / "nobody.sock").string();
  StepClient client(address, 42);
  auto reply = client.list_steps(42, 5);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().code, Errc::unavailable);
  EXPECT_NE(reply.message().find("cannot reach the step manager of job 42 at " + address), std::string::npos)
      << reply.message();
  pb::StepSpec spec;
  spec.add_argv("true");
  auto stream = client.run(spec);
  std::string message;
  if (!stream.ok()) {
    message = stream.message();
  } else {
    pb::StepServerMessage msg;
    EXPECT_FALSE((*stream)->read(msg));
    message = (*stream)->finish().message();
  }
  EXPECT_NE(message.find("cannot reach the step manager of job 42"), std::string::npos) << message;
}

}  // namespace
}  // namespace corral::cli
