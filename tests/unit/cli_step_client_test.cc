// StepClient against an in-process fake step manager on a Unix socket: the RunStep
// conversation (create, waiting, created, output, a signal from another thread, exit),
// ListSteps, and the message when nobody listens.
#include <csignal>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/client/step_client.h"
#include "common.pb.h"
#include "steps.grpc.pb.h"
#include "temp_dir.h"

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

class StepClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    address_ = "unix:" + (dir_.path() / "step.sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  test::TempDir dir_;
  std::string address_;
  FakeStepManager service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(StepClientTest, RunsAStepAndSendsStdinAndSignalsFromOtherThreads) {
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

TEST_F(StepClientTest, ReportsTheStepManagersRefusalInItsOwnWords) {
  StepClient client(address_, 42);
  auto stream = client.run(pb::StepSpec{});  // no argv
  ASSERT_TRUE(stream.ok()) << stream.message();
  pb::StepServerMessage msg;
  EXPECT_FALSE((*stream)->read(msg));
  Status st = (*stream)->finish();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "the step has no command");
}

TEST_F(StepClientTest, ListsSteps) {
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
