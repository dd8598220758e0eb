// corral-rpc-probe: a request to corrald written by hand, not by the corral CLI, for tests
// that play a client who does not follow the rules (no credential, a replayed one, one
// made for something else).
//
//   corral-rpc-probe [--fence] TARGET [CREDENTIAL]
//
// Sends one Ping to corrald at TARGET (a gRPC address) — or with --fence a JobFence to a
// node agent's StepService there — with CREDENTIAL as its MUNGE metadata when given, and
// prints the gRPC status code and message; exits 0 when the answer was OK.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <string>

#include "corral.grpc.pb.h"
#include "net/munge_cred.h"

int main(int argc, char** argv) {
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
