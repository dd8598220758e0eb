// The channel from `corral` to one job's step manager (StepService in the node agent of
// the job's first node): RunStep as a stream that one thread reads while others write
// stdin, signals and window sizes, and ListSteps. gRPC errors become messages a user can
// act on ("cannot reach the step manager of job 42 at unix:/...: connection refused").
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common.pb.h"
#include "steps.pb.h"
#include "util/result.h"

namespace corral::cli {

namespace pb = corral::v1;

// One RunStep call. read() is for one thread; the send_* calls may come from any other
// threads (they are serialized here, as gRPC allows one writer at a time).
class StepStream {
 public:
  // The transport: gRPC's RunStep, or the agent's own protocol on its Unix socket.
  struct Impl {
    virtual ~Impl() = default;
    virtual bool read(pb::StepServerMessage& msg) = 0;
    virtual Status finish() = 0;
    virtual bool send(const pb::StepClientMessage& msg) = 0;
    // Sends {create: spec}; a transport that writes the bytes itself need not copy `spec`
    // (its environment) into a message first.
    virtual bool send_create(const pb::StepSpec& spec);
    virtual void close_writes() = 0;
    virtual void cancel() = 0;
  };
  explicit StepStream(std::unique_ptr<Impl> impl);
  ~StepStream();  // cancels the call if it is still open
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

  // The next message; false at the end of the stream (then finish() says why).
  bool read(pb::StepServerMessage& msg);
  // The stream's outcome once read() returned false: ok, or why it broke.
  Status finish();

  // False once the stream is closed (the step ended or the connection broke).
  bool send(const pb::StepClientMessage& msg);
  bool send_create(const pb::StepSpec& spec);
  bool send_stdin(std::string_view data);
  bool send_stdin_eof();
  bool send_signal(int signal);
  bool send_winsize(unsigned rows, unsigned cols);
  // Half-closes our side (after the step's exit: nothing more to say); sends fail after.
  void close_writes();
  // From any thread: ends the call; read() returns false soon. The step manager ends a
  // step whose client went away.
  void cancel();

 private:
  std::unique_ptr<Impl> impl_;
};

class StepSocketPool;

class StepClient {
 public:
  // Its calls may come from several threads at once. `address`: "unix:/path" or
  // "host:port" (JobInfo.stepmgr, $CORRAL_STEPMGR). `jobid`
  // only names the job in error messages. Over a Unix socket RunStep skips gRPC (the
  // agent's own protocol, net/step_frames.h) unless CORRAL_STEP_TRANSPORT=grpc; the gRPC
  // channel is made on first use.
  StepClient(std::string address, uint64_t jobid);
  ~StepClient();
  StepClient(const StepClient&) = delete;
  StepClient& operator=(const StepClient&) = delete;

  const std::string& address() const { return address_; }
  uint64_t jobid() const { return jobid_; }

  // Opens RunStep and sends `create`. The step's answers come through read().
  Result<std::unique_ptr<StepStream>> run(const pb::StepSpec& spec);
  // ListSteps of `jobid` (0: every job of this step manager).
  Result<pb::ListStepsReply> list_steps(uint64_t jobid, double timeout_seconds = 10);

 private:
  struct Stub;
  // The RunStep transport for address_: the agent's own protocol or gRPC.
  Result<std::unique_ptr<StepStream::Impl>> open_stream();
  // The gRPC channel and stub, made on first use; null with setup_ saying why not.
  Stub* stub();
  std::string address_;
  uint64_t jobid_;
  std::mutex stub_mu_;
  std::unique_ptr<Stub> stub_;  // under stub_mu_ until made
  std::shared_ptr<StepSocketPool> sockets_;  // a Unix step manager's idle connections
  Status setup_;                // why the channel could not be made (an unreadable CORRAL_TLS_CA)
};

// How a failed call to the step manager reads: unreachable -> "cannot reach the step
// manager of job 42 at ADDR: REASON"; refusals keep the step manager's own words.
Error step_rpc_error(int grpc_code, const std::string& message, uint64_t jobid, const std::string& address);

}  // namespace corral::cli
