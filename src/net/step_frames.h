// RunStep without gRPC, for clients on the agent's own Unix socket (`corral run` inside an
// allocation, the step API of the benchmarks): after the preface, each side sends frames
//   [type: 1 byte][length: 4 bytes, big-endian][payload: length bytes]
// client -> agent: kMessage frames carrying StepClientMessage (the first carries `create`);
// agent -> client: kMessage frames carrying StepServerMessage, then one kStatus frame
// ([code: 1 byte, gRPC's numbering][message]) that ends the call. The agent's listener
// tells this protocol from gRPC's HTTP/2 by the preface (net/peer_listener.h).
// A connection carries one call after another: when a call has ended, the client has not
// closed its side for writing and the agent holds no unread frame of it, the agent keeps
// the connection and reads the next call's `create` from it. A client sends that only
// after the last call's status frame, and reuses only connections on which it sent
// nothing but `create` (anything else could still be in flight). An agent before this
// closed every connection after its call; clients see that as EOF on an idle connection
// and connect again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::net {

inline constexpr std::string_view kStepPreface = "CORRAL-STEP/1\n";
inline constexpr uint8_t kStepFrameMessage = 1;
inline constexpr uint8_t kStepFrameStatus = 2;
inline constexpr size_t kStepFrameHeader = 5;

// Appends one frame to `out`.
void append_step_frame(std::string& out, uint8_t type, std::string_view payload);
// A kStatus frame's payload.
std::string step_status_payload(int code, std::string_view message);
// Appends a kStatus frame (the call's end) to `out`.
void append_status_frame(std::string& out, int code, std::string_view message);
struct StepStatus {
  int code = 0;
  std::string message;
};
Result<StepStatus> parse_step_status(std::string_view payload);

// Cuts frames out of a byte stream. feed() what was read, then next() until it returns
// nullopt; a frame longer than `max_payload` (or of an unknown type) is an error, after
// which the stream is unusable.
class StepFrameReader {
 public:
  explicit StepFrameReader(size_t max_payload) : max_payload_(max_payload) {}
  struct Frame {
    uint8_t type = 0;
    std::string payload;
  };
  void feed(std::string_view bytes) { buf_.append(bytes); }
  Result<std::optional<Frame>> next();
  bool empty() const { return buf_.size() == used_; }
  size_t buffered() const { return buf_.size() - used_; }

 private:
  size_t max_payload_;
  std::string buf_;
  size_t used_ = 0;  // bytes of buf_ already returned
};

}  // namespace corral::net
