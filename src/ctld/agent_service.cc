#include "ctld/agent_service.h"

#include <string>
#include <thread>

#include "job/hmac_key.h"
#include "net/grpc_credential.h"
#include "net/grpc_status.h"

namespace corral::ctld {

// The agent's stream: this thread reads, a second one writes the link's batches.
grpc::Status AgentService::Stream(grpc::ServerContext* ctx,
                                  grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) {
  auto c = callers_.of(ctx);
  if (!c) return refused(c);
  auto session_key = job::generate_key();
  if (!session_key) return {grpc::StatusCode::INTERNAL, session_key.message()};
  if (!c->origin.empty()) {
    // Over TCP the agent cannot know who answers; it checks this before it obeys anything.
    // The credential also carries the connection's session key, which only the agent's
    // uid can decode (munged refuses everyone else).
    auto proof = callers_.credentials()->encode_for(std::string(net::kControllerPayload) + *session_key, c->uid);
    if (!proof) return {grpc::StatusCode::UNAVAILABLE, "corrald cannot prove itself: " + proof.message()};
    ctx->AddInitialMetadata(std::string(net::kCredentialMetadataKey), *proof);
    // Sent now: the agent checks it before it sends its registration.
    stream->SendInitialMetadata();
  }
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) return {grpc::StatusCode::INVALID_ARGUMENT, "the first agent message must be register"};
  std::shared_ptr<AgentLink> link;
  if (auto st = ctl_.agent_register(
          *c, first.register_(), [ctx] { ctx->TryCancel(); }, &link, first.output(), std::move(*session_key));
      !st.ok())
    return net::to_grpc(st);
  std::thread writer([&] {
    v1::ControllerMessage out;
    while (link->next(out, 1000)) {
      if (out.ByteSizeLong() == 0) continue;
      if (!stream->Write(out)) break;
      out.Clear();
    }
  });
  v1::AgentMessage msg;
  while (stream->Read(&msg)) {
    ctl_.agent_message(*link, msg);
    msg.Clear();
  }
  link->detach();
  writer.join();
  ctl_.agent_disconnected(*link);
  return grpc::Status::OK;
}

}  // namespace corral::ctld
