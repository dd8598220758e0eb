// Blocking frames (net/step_frames.h's framing) over a connected stream socket, for one
// reader thread and one writer thread at a time: the agent stream without gRPC
// (net/agent_frames.h) on both of its ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/step_frames.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::net {

class FrameChannel {
 public:
  // `max_in`: the largest frame payload read() accepts. The descriptor is made blocking.
  FrameChannel(UniqueFd fd, size_t max_in);

  // The next frame. Errors: Errc::unavailable at end of stream or on a read error (after
  // shutdown() too), Errc::invalid_argument for a frame over the limit or of no known type.
  Result<StepFrameReader::Frame> read();
  // Waits at most `ms` for the first byte of the next frame (then reads it whole, as
  // read()); Errc::unavailable, saying so, when none came.
  Result<StepFrameReader::Frame> read_within(int ms);
  // Writes one frame whole; false when the connection failed (errno set).
  bool write(uint8_t type, std::string_view payload);
  // Any thread: ends reads and writes in progress and to come (the descriptor stays open
  // until the channel is destroyed, so no other connection can take its number).
  void shutdown();
  // True once read() returned a frame: a peer that closed before saying anything did not
  // understand the preface.
  bool heard() const { return heard_; }

 private:
  UniqueFd fd_;
  StepFrameReader reader_;
  bool heard_ = false;
};

}  // namespace corral::net
