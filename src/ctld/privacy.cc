#include "ctld/privacy.h"

#include <nlohmann/json.hpp>

namespace corral::ctld {

void redact(v1::JobInfo& info) {
  info.clear_jobspec();
  info.clear_cwd();
  for (auto& line : *info.mutable_eventlog()) line = redact_event_line(line);
}

void redact(v1::JobEvent& ev) { ev.set_context("{}"); }

void redact(v1::StepInfo& step) { step.clear_command(); }

std::string redact_event_line(const std::string& line) {
  auto ev = nlohmann::json::parse(line, nullptr, false);
  if (!ev.is_object()) return "{}";
  ev["context"] = nlohmann::json::object();
  return ev.dump();
}

}  // namespace corral::ctld
