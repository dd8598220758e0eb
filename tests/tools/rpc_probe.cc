// corral-rpc-probe: a request to corrald written by hand, not by the corral CLI, for tests
// that play a client who does not follow the rules (no credential, a replayed one, one
// made for something else).
//
//   corral-rpc-probe TARGET [CREDENTIAL]
//
// Sends one Ping to TARGET (a gRPC address), with CREDENTIAL as its MUNGE metadata when
// given, and prints the gRPC status code and message; exits 0 when corrald answered OK.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <string>

#include "corral.grpc.pb.h"
#include "net/munge_cred.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: corral-rpc-probe TARGET [CREDENTIAL]\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  auto stub = corral::v1::Controller::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (argc == 3) ctx.AddMetadata(std::string(corral::net::kMungeMetadataKey), argv[2]);
  corral::v1::PingReply reply;
  grpc::Status st = stub->Ping(&ctx, corral::v1::PingRequest{}, &reply);
  std::printf("%d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  return st.ok() ? 0 : 1;
}
