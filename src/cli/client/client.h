// The channel from `corral` to the controller: URI resolution, one method per unary rpc
// with a short deadline, a Watch stream without one, and gRPC errors turned into
// messages a user can act on ("cannot reach the controller at ..."). On corrald's Unix
// socket the common unary calls go without gRPC (net/rpc_frames.h; CORRAL_RPC_TRANSPORT=grpc
// sends them through gRPC too); a gRPC channel is made only for a call that needs one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "client.pb.h"
#include "common.pb.h"
#include "util/result.h"

namespace corral::cli {

namespace pb = corral::v1;

inline constexpr std::string_view kDefaultUri = "unix:/run/corral/corrald.sock";

// --uri wins, then $CORRAL_URI, then the default socket.
std::string resolve_uri(std::string_view flag);

}  // namespace corral::cli
namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc
namespace corral::cli {

// A request to `uri` over TCP carries a MUNGE credential from munged at
// $CORRAL_MUNGE_SOCKET (default libmunge's); on a Unix socket the kernel identifies us.
Status authenticate(grpc::ClientContext& ctx, const std::string& uri);
// A client's channel to `target`: it fails fast when nobody listens (reconnects after
// 100 ms, at most 1 s apart, instead of backing off for the call's deadline), takes replies
// of any size, and uses TLS trusting $CORRAL_TLS_CA when that is set and the target is on
// the network (net/tls.h). `own_connection`: not shared with other channels of the process.
// No channel but an error when the CA cannot be read, or when the address cannot work (a
// Unix socket path longer than a socket address holds, where gRPC would only say "Failed
// to create secure client channel"): that one is said through `unreachable`.
using Unreachable = std::function<std::string(const std::string& why)>;
Result<std::shared_ptr<grpc::Channel>> client_channel(const std::string& target, bool own_connection,
                                                      const Unreachable& unreachable);

// gRPC's "failed to connect to all addresses; last error: UNKNOWN: unix:/x: Connection
// refused" says the useful part last: the reason alone ("connection refused"), or the
// whole message when it is none of the usual ones.
std::string short_reason(const std::string& message);

// A server stream of WatchReply. read() returns false at the end; then finish() says
// whether the stream ended cleanly.
class WatchStream {
 public:
  struct Impl;
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
