// One session of the agent's stream to corrald, whichever wire carries it: gRPC's
// Agents.Stream (any address), or corral's own frames on corrald's Unix socket
// (net/agent_frames.h). ControllerLink runs a session the same way over either.
#pragma once

#include <memory>
#include <string>

#include "agent.pb.h"
#include "util/result.h"

namespace corral::node {

struct AgentConfig;

class ControllerStream {
 public:
  virtual ~ControllerStream() = default;

  // proven: *session_key is the connection's (empty over a Unix socket, where it comes in
  // the register ack); refused: *why says whom it did not trust; ended: the controller
  // ended the stream first, and finish() says why.
  enum class Proof { proven, refused, ended };
  // Over TCP the controller proves itself before the agent says anything (an impostor
  // learns nothing of this agent's nodes).
  virtual Proof prove(std::string* session_key, std::string* why) = 0;
  virtual bool write(const v1::AgentMessage& msg) = 0;  // one writer at a time
  virtual bool read(v1::ControllerMessage* msg) = 0;    // one reader at a time
  // Any thread: ends reads and writes in progress and to come.
  virtual void cancel() = 0;
  // Once nobody reads or writes: why the stream ended (empty when it closed with no reason).
  virtual std::string finish() = 0;
  // The controller closed the connection without a word: it does not know this wire.
  virtual bool unheard() const { return false; }
};

// `uri`: "unix:/path", "host:port" and gRPC's other forms.
Result<std::unique_ptr<ControllerStream>> open_grpc_stream(const std::string& uri, const AgentConfig& config);
// `path`: corrald's Unix socket.
Result<std::unique_ptr<ControllerStream>> open_socket_stream(const std::string& path);

}  // namespace corral::node
