// The agent stream over gRPC (Agents.Stream): the only kind over TCP, where the
// controller proves itself with a credential in its initial metadata.
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include <fmt/format.h>

#include "agent.grpc.pb.h"
#include "job/hmac_key.h"
#include "net/grpc_credential.h"
#include "net/message_limits.h"
#include "net/resolve.h"
#include "net/tls.h"
#include "node/controller_stream.h"
#include "node/exec/agent_config.h"

namespace corral::node {

namespace {

// "host:port", "ipv4:host:port", "dns:///host:port" -> host.
std::string controller_host(const std::string& uri) {
  std::string target = uri;
  for (const char* scheme : {"dns:///", "ipv4:", "ipv6:"})
    if (target.rfind(scheme, 0) == 0) target = target.substr(std::string_view(scheme).size());
  const size_t colon = target.rfind(':');
  std::string host = colon == std::string::npos ? target : target.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

class GrpcControllerStream final : public ControllerStream {
 public:
  GrpcControllerStream(std::string uri, const AgentConfig& config) : uri_(std::move(uri)), config_(config) {}

  Status open() {
    new_channel();
    // Over TCP the controller knows this agent by its credential (MUNGE's, or the cluster key's).
    if (auto st = net::add_credential(ctx_, uri_, *config_.credentials); !st) return st;
    stream_ = stub_->Stream(&ctx_);
    return {};
  }

  Proof prove(std::string* session_key, std::string* why) override {
    if (!net::over_network(uri_)) return Proof::proven;
    stream_->WaitForInitialMetadata();
    if (ctx_.GetServerInitialMetadata().empty()) return Proof::ended;
    auto proof = check_controller();
    if (proof) {
      *session_key = std::move(*proof);
      return Proof::proven;
    }
    *why = proof.message();
    return Proof::refused;
  }

  bool write(const v1::AgentMessage& msg) override { return stream_->Write(msg); }
  bool read(v1::ControllerMessage* msg) override { return stream_->Read(msg); }
  void cancel() override { ctx_.TryCancel(); }
  std::string finish() override {
    const grpc::Status status = stream_->Finish();
    return status.ok() ? std::string() : status.error_message();
  }

 private:
  // A fresh channel per session: a channel that failed keeps its own reconnect and
  // re-resolution timers, which made reconnects seconds slower than our backoff.
  void new_channel() {
    // gRPC's own reconnect backoff (1 s growing to 120 s) would keep failing our calls
    // long after the controller is back; keep it within ours.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // no state shared with the failed channel
    // A controller restart must be noticed even when nothing is being written.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetMaxReceiveMessageSize(static_cast<int>(net::kMaxAgentDownMessage));
    args.SetMaxSendMessageSize(static_cast<int>(net::kMaxAgentUpMessage));
    auto creds = net::channel_credentials(config_.tls_ca, uri_);  // checked at start-up
    channel_ = grpc::CreateCustomChannel(uri_, creds ? *creds : grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Agents::NewStub(channel_);
  }

  // Over TCP the answer must prove it comes from the real controller before the agent
  // acts on it: a credential (controller payload) from root, made on a host the
  // controller's address names, for this agent's uid only. It carries the connection's
  // session key. (On the Unix socket only root could have made it.)
  Result<std::string> check_controller() const {
    const auto& md = ctx_.GetServerInitialMetadata();
    auto it = md.find(grpc::string_ref(net::kCredentialMetadataKey.data(), net::kCredentialMetadataKey.size()));
    if (it == md.end())
      return denied(fmt::format("the controller at {} did not prove itself (no {} credential)", uri_,
                                config_.credentials->name()));
    std::string session_key;
    auto id = config_.credentials->decode(std::string_view(it->second.data(), it->second.size()),
                                          net::kControllerPayload, &session_key);
    if (!id) return denied("the controller at " + uri_ + " did not prove itself: " + id.message());
    if (id->uid != 0 && id->uid != ::getuid())
      return denied(fmt::format("the controller at {} runs as uid {}, not root: refused", uri_, id->uid));
    const std::string host = controller_host(uri_);
    const auto addrs = net::resolve_ipv4(host);
    if (std::find(addrs.begin(), addrs.end(), id->origin) == addrs.end())
      return denied(fmt::format("the controller's credential comes from {}, not from {}: refused",
                                id->origin.empty() ? "an unknown host" : id->origin, host));
    if (session_key.size() != job::kKeyBytes)
      return denied("the controller at " + uri_ + " sent no session key (a corrald older than this agent?)");
    return session_key;
  }

  std::string uri_;
  const AgentConfig& config_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Agents::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>> stream_;
};

}  // namespace

Result<std::unique_ptr<ControllerStream>> open_grpc_stream(const std::string& uri, const AgentConfig& config) {
  auto s = std::make_unique<GrpcControllerStream>(uri, config);
  if (auto st = s->open(); !st) return st.error();
  return std::unique_ptr<ControllerStream>(std::move(s));
}

}  // namespace corral::node
