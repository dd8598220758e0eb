#include "job/eventlog.h"

#include <charconv>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

namespace corral::job {
namespace {

using json = nlohmann::json;

// Microsecond precision, and locale-independent (snprintf would honour LC_NUMERIC).
std::string format_timestamp(double t) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, t, std::chars_format::fixed, 6);
  if (ec != std::errc()) return "0.000000";
  return std::string(buf, ptr);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need the rest.
std::string json_message(const std::exception& e) {
  std::string_view m = e.what();
  if (!m.empty() && m.front() == '[') {
    auto close = m.find("] ");
    if (close != std::string_view::npos) m.remove_prefix(close + 2);
  }
  return std::string(m);
}

}  // namespace

double now() {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  return static_cast<double>(us) / 1e6;
}

Event make_event(std::string name, std::string context_json) {
  return Event{now(), std::move(name), std::move(context_json)};
}

// Built by hand rather than through json::dump so the key order is the RFC's
// (timestamp, name, context) and the context text is not re-parsed on the hot path.
std::string encode_event(const Event& ev) {
  std::string line;
  line.reserve(48 + ev.name.size() + ev.context.size());
  line += "{\"timestamp\":";
  line += format_timestamp(ev.timestamp);
  line += ",\"name\":";
  line += json(ev.name).dump();
  line += ",\"context\":";
  line += ev.context.empty() ? std::string_view("{}") : std::string_view(ev.context);
  line += '}';
  return line;
}

Result<Event> decode_event(std::string_view line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    return invalid("event is not valid JSON: " + json_message(e));
  }
  if (!j.is_object()) return invalid("event must be a JSON object");
  Event ev;
  auto ts = j.find("timestamp");
  if (ts == j.end() || !ts->is_number() || !std::isfinite(ts->get<double>())) {
    return invalid("event: timestamp must be a number");
  }
  ev.timestamp = ts->get<double>();
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return invalid("event: name must be a non-empty string");
  }
  ev.name = name->get<std::string>();
  // RFC 18 makes context optional; a missing one reads as empty.
  auto ctx = j.find("context");
  if (ctx != j.end()) {
    if (!ctx->is_object()) return invalid("event " + ev.name + ": context must be an object");
    ev.context = ctx->dump();
  }
  return ev;
}

Result<std::vector<Event>> decode_eventlog(std::string_view text) {
  std::vector<Event> events;
  size_t lineno = 0;
  while (!text.empty()) {
    ++lineno;
    auto nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    auto ev = decode_event(line);
    if (!ev) return invalid("eventlog line " + std::to_string(lineno) + ": " + ev.message());
    events.push_back(std::move(ev).value());
  }
  return events;
}

}  // namespace corral::job
