#include "cli/step_format.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "job/step_id.h"
#include "util/units.h"

namespace corral::cli {

namespace pb = corral::v1;

namespace {

// Named steps (batch, interactive) first, then numbers; unknown names last by text.
std::tuple<uint64_t, int, uint32_t, std::string> order_key(const pb::StepInfo& s) {
  auto n = job::parse_step_name(s.step());
  if (!n) return {s.jobid(), 2, 0, s.step()};
  if (*n >= job::kMaxStepNumber) return {s.jobid(), 0, *n, s.step()};
  return {s.jobid(), 1, *n, s.step()};
}

}  // namespace

std::string step_id_text(const pb::StepInfo& s) { return fmt::format("{}.{}", s.jobid(), s.step()); }

double step_elapsed(const pb::StepInfo& s, double now) {
  if (s.t_start() <= 0) return 0;
  const double end = s.t_end() > 0 ? s.t_end() : now;
  return std::max(0.0, end - s.t_start());
}

std::vector<std::string> step_cells(const pb::StepInfo& s, double now) {
  return {step_id_text(s),
          s.name(),
          s.state(),
          std::to_string(s.nnodes()),
          std::to_string(s.ntasks()),
          std::to_string(s.ncores()),
          format_elapsed(step_elapsed(s, now)),
          s.nodelist()};
}

nlohmann::json step_to_json(const pb::StepInfo& s) {
  return {{"jobid", s.jobid()},           {"step", s.step()},
          {"userid", s.userid()},         {"name", s.name()},
          {"state", s.state()},           {"nodelist", s.nodelist()},
          {"nnodes", s.nnodes()},         {"ntasks", s.ntasks()},
          {"ncores", s.ncores()},         {"t_submit", s.t_submit()},
          {"t_start", s.t_start()},       {"t_end", s.t_end()},
          {"waitstatus", s.waitstatus()}, {"cpu_seconds", s.cpu_seconds()},
          {"command", s.command()}};
}

std::vector<pb::StepInfo> merge_steps(const std::vector<pb::StepInfo>& live,
                                      const std::vector<pb::StepInfo>& recorded) {
  std::map<std::pair<uint64_t, std::string>, const pb::StepInfo*> by_id;
  for (const auto& s : recorded) by_id[{s.jobid(), s.step()}] = &s;
  for (const auto& s : live) by_id[{s.jobid(), s.step()}] = &s;
  std::vector<pb::StepInfo> out;
  out.reserve(by_id.size());
  for (const auto& [key, s] : by_id) out.push_back(*s);
  std::sort(out.begin(), out.end(),
            [](const pb::StepInfo& a, const pb::StepInfo& b) { return order_key(a) < order_key(b); });
  return out;
}

}  // namespace corral::cli
