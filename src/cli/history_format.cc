#include "cli/history_format.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "cli/job_format.h"
#include "cli/job_row.h"
#include "cli/step_format.h"
#include "cli/values.h"
#include "job/step_id.h"
#include "util/rounding.h"
#include "util/units.h"

namespace corral::cli {

namespace pb = corral::v1;

namespace {

bool parse_number(std::string_view text, double& out) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

Error bad_time(std::string_view option, std::string_view text) {
  return invalid(
      fmt::format("{}: cannot understand '{}' (use now-1h, now-2days, YYYY-MM-DD[THH:MM[:SS]], HH:MM or "
                  "epoch seconds)",
                  option, text));
}

// "now-1h": parse_begin_time knows "now+N[unit]"; the past is the same amount backwards.
Result<double> parse_before_now(std::string_view option, std::string_view text, double now) {
  const std::string forward = "now+" + std::string(text.substr(4));
  auto later = parse_begin_time(forward, now);
  if (!later) return bad_time(option, text);
  return now - (*later - now);
}

// sacct's job ELAPSED: from the start to the end (or now).
double job_elapsed(const pb::JobInfo& j, double now) {
  std::string deps;
  return run_time(row_of(j, deps), now);
}

std::string job_state(const pb::JobInfo& j) {
  return j.state() == "INACTIVE" && !j.result().empty() ? j.result() : j.state();
}

// The job's own tasks plus its steps' (the batch and interactive steps are the job's own
// tasks, already in cpu_seconds).
double job_cpu(const pb::HistoryJob& h) {
  double total = h.job().cpu_seconds();
  for (const auto& s : h.steps()) {
    auto n = job::parse_step_name(s.step());
    if (n && *n < job::kMaxStepNumber) total += s.cpu_seconds();
  }
  return total;
}

}  // namespace

Result<double> parse_history_time(std::string_view option, std::string_view text, double now) {
  if (text.empty()) return bad_time(option, text);
  double epoch = 0;
  if (parse_number(text, epoch)) return epoch;
  if (text.size() > 4 && (text.substr(0, 4) == "now-" || text.substr(0, 4) == "NOW-"))
    return parse_before_now(option, text, now);
  auto when = parse_begin_time(text, now);
  if (!when) return bad_time(option, text);
  // parse_begin_time looks forward ("10:00" is the next 10:00); history looks back.
  const bool clock = text.find(':') != std::string_view::npos && text.find('-') == std::string_view::npos;
  if (clock && *when > now) return *when - 86400;
  return *when;
}

std::string format_cpu_time(double seconds) {
  if (!(seconds > 0)) return "00:00.000";
  if (seconds < 3600) {
    const long ms = round_to_long(seconds * 1000);
    return fmt::format("{:02}:{:02}.{:03}", ms / 60000, ms / 1000 % 60, ms % 1000);
  }
  const long s = round_to_long(seconds);
  const long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
  if (d > 0) return fmt::format("{}-{:02}:{:02}:{:02}", d, h, m, sec);
  return fmt::format("{:02}:{:02}:{:02}", h, m, sec);
}

std::vector<std::vector<std::string>> history_rows(const pb::HistoryReply& reply, double now) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& h : reply.jobs()) {
    const pb::JobInfo& j = h.job();
    rows.push_back({std::to_string(j.id()), j.name(), j.username().empty() ? std::to_string(j.userid()) : j.username(),
                    job_state(j), format_elapsed(job_elapsed(j, now)), exit_code_pair(j.waitstatus()),
                    std::to_string(j.nnodes()), j.nodelist(), format_cpu_time(job_cpu(h))});
    std::vector<pb::StepInfo> steps(h.steps().begin(), h.steps().end());
    for (const auto& s : merge_steps({}, steps)) {
      rows.push_back({step_id_text(s), s.name(), "", s.state(), format_elapsed(step_elapsed(s, now)),
                      exit_code_pair(s.waitstatus()), std::to_string(s.nnodes()), s.nodelist(),
                      format_cpu_time(s.cpu_seconds())});
    }
  }
  return rows;
}

}  // namespace corral::cli
