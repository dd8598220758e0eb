// The channel from `corral` to the controller: URI resolution, one method per unary rpc
// with a short deadline, a Watch stream without one, and errors turned into messages a
// user can act on ("cannot reach the controller at ..."). On corrald's Unix socket every
// call goes without gRPC (net/rpc_frames.h; CORRAL_RPC_TRANSPORT=grpc sends them through
// gRPC); over TCP through gRPC (grpc_channel.h), whose channel is made on first use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cli/client/grpc_channel.h"
#include "client.pb.h"
#include "common.pb.h"
#include "util/result.h"

namespace corral::cli {

namespace pb = corral::v1;

inline constexpr std::string_view kDefaultUri = "unix:/run/corral/corrald.sock";

// --uri wins, then $CORRAL_URI, then the default socket.
std::string resolve_uri(std::string_view flag);

// gRPC's "failed to connect to all addresses; last error: UNKNOWN: unix:/x: Connection
// refused" says the useful part last: the reason alone ("connection refused"), or the
// whole message when it is none of the usual ones.
std::string short_reason(const std::string& message);

// A server stream of WatchReply. read() returns false at the end; then finish() says
// whether the stream ended cleanly. Over corrald's socket, or gRPC's Watch.
class WatchStream {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual bool read(pb::WatchReply& reply) = 0;
    virtual Status finish() = 0;
    virtual void cancel() = 0;
  };
  explicit WatchStream(std::unique_ptr<Impl> impl);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  bool read(pb::WatchReply& reply);
  Status finish();
  void cancel();  // from another thread: makes read() return false soon

 private:
  std::unique_ptr<Impl> impl_;
};

class Client {
 public:
  explicit Client(std::string uri);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& uri() const { return uri_; }

  Result<pb::SubmitReply> submit(const pb::SubmitRequest& req);
  Result<pb::CancelReply> cancel(const pb::CancelRequest& req);
  Result<pb::ListJobsReply> list_jobs(const pb::ListJobsRequest& req);
  Result<pb::JobTable> list_job_table(const pb::ListJobsRequest& req);
  Result<pb::JobInfo> get_job(const pb::GetJobRequest& req);
  Result<pb::ListNodesReply> list_nodes(const pb::ListNodesRequest& req);
  Result<pb::NodeStateReply> set_node_state(const pb::NodeStateRequest& req);
  Result<pb::GetTopologyReply> get_topology(const std::string& name);  // "": all
  // `corral <hook> ...`: the hook's JSON answer.
  Result<std::string> hook_query(const std::string& hook, const std::string& what, const std::string& args_json);
  // Finished steps of a job as the controller stored them (jobid 0: all of the caller's).
  Result<pb::ListStepsReply> list_steps(uint64_t jobid);
  // `corral history`: finished jobs with their steps.
  Result<pb::HistoryReply> history(const pb::HistoryRequest& req);
  Result<pb::PingReply> ping(double timeout_seconds = 10);
  Status shutdown(double timeout_seconds = 10);
  Result<std::unique_ptr<WatchStream>> watch(const pb::WatchRequest& req);

 private:
  struct Stub;
  std::string uri_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace corral::cli
