#include "net/step_frames.h"

#include <fmt/format.h>

#include "net/big_endian.h"

namespace corral::net {

void append_step_frame(std::string& out, uint8_t type, std::string_view payload) {
  out.push_back(static_cast<char>(type));
  put_be(out, payload.size(), 4);
  out.append(payload);
}

std::string step_status_payload(int code, std::string_view message) {
  std::string out(1, static_cast<char>(code & 0xff));
  out.append(message);
  return out;
}

void append_status_frame(std::string& out, int code, std::string_view message) {
  append_step_frame(out, kStepFrameStatus, step_status_payload(code, message));
}

Result<StepStatus> parse_step_status(std::string_view payload) {
  if (payload.empty()) return invalid("a step status frame without a code");
  return StepStatus{static_cast<unsigned char>(payload[0]), std::string(payload.substr(1))};
}

Result<std::optional<StepFrameReader::Frame>> StepFrameReader::next() {
  const std::string_view rest = std::string_view(buf_).substr(used_);
  if (rest.size() < kStepFrameHeader) {
    // Keep the buffer small: drop what was consumed once nothing whole is left.
    buf_.erase(0, used_);
    used_ = 0;
    return std::optional<Frame>();
  }
  const auto type = static_cast<uint8_t>(rest[0]);
  const uint64_t len = get_be(rest, 1, 4);
  if (type != kStepFrameMessage && type != kStepFrameStatus)
    return invalid(fmt::format("step protocol: unknown frame type {}", type));
  if (len > max_payload_)
    return invalid(fmt::format("step protocol: a frame of {} bytes is over the limit of {}", len, max_payload_));
  if (rest.size() < kStepFrameHeader + len) {
    buf_.erase(0, used_);
    used_ = 0;
    return std::optional<Frame>();
  }
  Frame f{type, std::string(rest.substr(kStepFrameHeader, len))};
  used_ += kStepFrameHeader + len;
  if (used_ == buf_.size()) {
    buf_.clear();
    used_ = 0;
  }
  return std::optional<Frame>(std::move(f));
}

}  // namespace corral::net
