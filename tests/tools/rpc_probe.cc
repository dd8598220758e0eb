// corral-rpc-probe: a request to corrald written by hand, not by the corral CLI, for tests
// that play a client who does not follow the rules (no credential, a replayed one, one
// made for something else).
//
//   corral-rpc-probe [--fence] TARGET [CREDENTIAL]
//   corral-rpc-probe --sign AUTHD_SOCKET [PAYLOAD]
//   corral-rpc-probe --register TARGET NODE ENTRIES BYTES
//
// Sends one Ping to corrald at TARGET (a gRPC address) — or with --fence a JobFence to a
// node agent's StepService there — with CREDENTIAL as its credential metadata when given,
// and prints the gRPC status code and message; exits 0 when the answer was OK.
// With --sign it prints a cluster-key credential corral-authd made for the caller (payload
// "corral-request-v1" unless given), to be replayed or altered by the test.
// With --register it opens an agent stream and registers NODE with ENTRIES hardware
// entries of BYTES bytes each (an agent whose hooks report too much), prints the status
// (0 "registered" when corrald acknowledged) and holds the stream 2 seconds.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "agent.grpc.pb.h"
#include "client.grpc.pb.h"
#include "net/cluster_key_auth.h"
#include "net/credentials.h"
#include "steps.grpc.pb.h"

namespace {

int sign(const std::string& socket, const std::string& payload) {
  auto creds = corral::net::cluster_key_credentials("", socket);
  auto cred = creds ? (*creds)->encode(payload) : corral::Result<std::string>(creds.error());
  if (!cred) {
    std::fprintf(stderr, "corral-rpc-probe: %s\n", cred.message().c_str());
    return 1;
  }
  std::printf("%s\n", cred->c_str());
  return 0;
}

int register_node(const std::string& target, const std::string& node, int entries, size_t bytes) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = corral::v1::Agents::NewStub(channel)->Stream(&ctx);
  corral::v1::AgentMessage msg;
  auto* reg = msg.mutable_register_();
  reg->set_agent_id("probe-" + node);
  reg->set_incarnation("probe");
  auto* n = reg->add_nodes();
  n->set_name(node);
  n->set_cores(1);
  for (int i = 0; i < entries; ++i) (*n->mutable_hardware())["hook" + std::to_string(i)] = std::string(bytes, 'x');
  corral::v1::ControllerMessage answer;
  if (stream->Write(msg) && stream->Read(&answer) && answer.register_ack()) {
    std::printf("0 registered\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ctx.TryCancel();
    return 0;
  }
  stream->WritesDone();
  const grpc::Status st = stream->Finish();
  std::printf("%d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--register")
    return register_node(argv[2], argv[3], std::stoi(argv[4]), std::stoul(argv[5]));
  if (argc > 2 && std::string(argv[1]) == "--sign")
    return sign(argv[2], argc > 3 ? argv[3] : std::string(corral::net::kRequestPayload));
  const bool fence = argc > 1 && std::string(argv[1]) == "--fence";
  const int first = fence ? 2 : 1;
  if (argc - first < 1 || argc - first > 2) {
    std::fprintf(stderr, "usage: corral-rpc-probe [--fence] TARGET [CREDENTIAL]\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(argv[first], grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (argc - first == 2) ctx.AddMetadata(std::string(corral::net::kCredentialMetadataKey), argv[first + 1]);
  grpc::Status st;
  if (fence) {
    corral::v1::JobFenceRequest req;  // a barrier of a job that does not exist
    req.set_jobid(999999);
    req.set_nodes(1);
    req.set_node("nowhere");
    corral::v1::JobFenceReply reply;
    st = corral::v1::StepService::NewStub(channel)->JobFence(&ctx, req, &reply);
  } else {
    corral::v1::PingReply reply;
    st = corral::v1::Controller::NewStub(channel)->Ping(&ctx, corral::v1::PingRequest{}, &reply);
  }
  std::printf("%d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  return st.ok() ? 0 : 1;
}
