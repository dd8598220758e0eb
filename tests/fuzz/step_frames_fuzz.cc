// The agent's own step protocol (net/step_frames.h): bytes a local client sends, cut into
// frames in pieces of any size. A frame the reader returns must re-encode to the bytes it
// came from, and pieces must not change what comes out.
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "net/step_frames.h"

namespace {

// Frames (type and payload) until the first error; `error` says whether one came.
std::vector<std::string> frames(std::string_view bytes, size_t piece, bool& error) {
  corral::net::StepFrameReader reader(1 << 16);
  std::vector<std::string> out;
  error = false;
  for (size_t at = 0; at < bytes.size() && !error; at += piece) {
    reader.feed(bytes.substr(at, piece));
    for (;;) {
      auto f = reader.next();
      if (!f) {
        error = true;
        break;
      }
      if (!*f) break;
      std::string again;
      corral::net::append_step_frame(again, (*f)->type, (*f)->payload);
      out.push_back(std::move(again));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 17;
  const std::string_view bytes = fuzz_text(data + 1, size - 1);
  bool error_whole = false, error_pieces = false;
  const auto whole = frames(bytes, bytes.size() + 1, error_whole);
  const auto pieces = frames(bytes, piece, error_pieces);
  CORRAL_FUZZ_CHECK(whole == pieces);
  CORRAL_FUZZ_CHECK(error_whole == error_pieces);
  std::string joined;
  for (const auto& f : whole) joined += f;
  CORRAL_FUZZ_CHECK(bytes.substr(0, joined.size()) == joined);
  if (!whole.empty() && whole.back()[0] == corral::net::kStepFrameStatus)
    (void)corral::net::parse_step_status(std::string_view(whole.back()).substr(corral::net::kStepFrameHeader));
  return 0;
}
