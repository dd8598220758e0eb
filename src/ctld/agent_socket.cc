#include "ctld/agent_socket.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>

#include "job/hmac_key.h"
#include "net/grpc_status.h"
#include "net/message_limits.h"

namespace corral::ctld {

namespace {

void refuse(net::FrameChannel& ch, const Status& st) {
  (void)ch.write(net::kStepFrameStatus, net::step_status_payload(net::grpc_code(st), st.message()));
}

}  // namespace

AgentSocketServer::~AgentSocketServer() {
  std::list<Conn> conns;
  {
    MutexLock lk(mu_);
    stopping_ = true;
    conns.swap(conns_);
  }
  for (auto& c : conns) c.channel->shutdown();
  for (auto& c : conns)
    if (c.thread.joinable()) c.thread.join();
}

void AgentSocketServer::adopt(UniqueFd fd, const Caller& caller) {
  auto channel = std::make_unique<net::FrameChannel>(std::move(fd), net::kMaxAgentUpMessage);
  if (!ctl_.may_register_agents(caller)) {
    // Said before any thread exists for it: a user's connections cost corrald nothing.
    refuse(*channel,
           Error{Errc::permission_denied, fmt::format("uid {} may not register node agents", caller.uid)});
    return;
  }
  MutexLock lk(mu_);
  reap();
  if (stopping_) return;
  if (conns_.size() >= kMaxConnections) {
    refuse(*channel, Error{Errc::resource_exhausted,
                           fmt::format("corrald serves at most {} agent connections at once", kMaxConnections)});
    return;
  }
  Conn& conn = conns_.emplace_back();
  conn.channel = std::move(channel);
  conn.thread = std::thread([this, &conn, caller] {
    serve(conn, caller);
    conn.done = true;
  });
}

void AgentSocketServer::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = conns_.erase(it);
  }
}

// One agent's stream: this thread reads, a second one writes the link's batches.
void AgentSocketServer::serve(Conn& conn, const Caller& caller) {
  net::FrameChannel& ch = *conn.channel;
  auto frame = ch.read_within(kRegisterWithinMs);
  if (!frame) {
    if (frame.error().code != Errc::unavailable) refuse(ch, frame.error());  // a frame too big, say
    return;
  }
  v1::AgentMessage first;
  if (frame->type != net::kStepFrameMessage || !first.ParseFromString(frame->payload) || !first.has_register_()) {
    refuse(ch, Error{Errc::invalid_argument, "the first agent message must be register"});
    return;
  }
  auto session_key = job::generate_key();
  if (!session_key) {
    refuse(ch, Error{Errc::internal, session_key.message()});
    return;
  }
  std::shared_ptr<AgentLink> link;
  // The descriptor stays open until this returns, after detach(): the cancel never
  // reaches a number that names another connection.
  if (auto st = ctl_.agent_register(
          caller, first.register_(), [&ch] { ch.shutdown(); }, &link, first.output(), std::move(*session_key));
      !st.ok()) {
    refuse(ch, st);
    return;
  }
  spdlog::info("agent {} streams over the socket without gRPC", link->agent_id());
  std::thread writer([&] {
    v1::ControllerMessage out;
    std::string bytes;
    while (link->next(out, 1000)) {
      if (out.ByteSizeLong() == 0) continue;
      bytes.clear();
      out.SerializeToString(&bytes);
      if (!ch.write(net::kStepFrameMessage, bytes)) break;
      out.Clear();
    }
    ch.shutdown();  // the reader stops too
  });
  v1::AgentMessage msg;
  for (;;) {
    auto next = ch.read();
    if (!next) {
      // (Said in the log only: the writer may be sending, and a channel has one writer.)
      if (next.error().code != Errc::unavailable)
        spdlog::warn("agent {}: {}; closing its stream", link->agent_id(), next.message());
      break;
    }
    if (next->type != net::kStepFrameMessage) break;  // the agent's goodbye
    if (!msg.ParseFromString(next->payload)) {
      spdlog::warn("agent {} sent a message that does not parse; closing its stream", link->agent_id());
      break;
    }
    ctl_.agent_message(*link, msg);
    msg.Clear();
  }
  link->detach();
  ch.shutdown();
  writer.join();
  ctl_.agent_disconnected(*link);
}

}  // namespace corral::ctld
