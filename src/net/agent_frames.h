// The agent stream (agent.proto's Agents.Stream, docs/interfaces/agent-stream.md) without
// gRPC, for node agents on corrald's own Unix socket: a connection that begins with
// kAgentPreface carries, in step_frames.h's framing,
//   agent -> corrald: kStepFrameMessage frames, each an AgentMessage (the first a `register`)
//   corrald -> agent: kStepFrameMessage frames, each a ControllerMessage (the first the
//                     register ack), and a kStepFrameStatus frame ([code: 1 byte, gRPC's
//                     numbering][message]) when corrald refuses or ends the stream.
// The same messages, in the same order, as over gRPC; the agent is who SO_PEERCRED says.
// Over TCP the stream stays on gRPC (TLS, and MUNGE credentials in its metadata). An agent
// whose corrald closes such a connection before answering (a corrald older than this
// protocol hands it to gRPC, which refuses it) uses gRPC from then on.
#pragma once

#include <string_view>

namespace corral::net {

inline constexpr std::string_view kAgentPreface = "CORRAL-AGENT/1\n";

}  // namespace corral::net
