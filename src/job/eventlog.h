// Eventlogs (Flux RFC 18): one JSON object per line, {"timestamp":T,"name":N,"context":{}}.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::job {

struct Event {
  double timestamp = 0;
  std::string name;
  std::string context = "{}";  // a JSON object, compact text

  bool operator==(const Event&) const = default;
};

double now();  // wall clock, seconds since the epoch
Event make_event(std::string name, std::string context_json = "{}");

std::string encode_event(const Event& ev);  // one line, no trailing newline
Result<Event> decode_event(std::string_view line);
// Whole eventlog text: blank lines are skipped; the error names the line number.
Result<std::vector<Event>> decode_eventlog(std::string_view text);

}  // namespace corral::job
