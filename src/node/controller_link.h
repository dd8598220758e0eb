// The agent's connection to corrald: one stream at a time (node/controller_stream.h: gRPC's
// Agents.Stream, or corral's own frames on corrald's Unix socket), re-established with
// backoff (100 ms doubling to 2 s) forever. A reader thread hands controller messages
// to the event loop; a writer thread sends the agent's batches in order, and a
// heartbeat when nothing else went out for the controller's heartbeat interval.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "agent.pb.h"

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

class Agent;

class ControllerLink {
 public:
  // `uri`: "unix:/path/to.sock" or "host:port".
  ControllerLink(std::string uri, EventLoop& loop, Agent& agent);
  ~ControllerLink();  // stop()
  ControllerLink(const ControllerLink&) = delete;
  ControllerLink& operator=(const ControllerLink&) = delete;

  void start();
  void stop();  // closes the stream; nothing queued is sent afterwards

  // Thread-safe. Batches of another session than the current one are dropped: their
  // content is in the `register` of the session that replaced it.
  void send(uint64_t session, corral::v1::AgentMessage msg);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
