#include "sim/report.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::sim {
namespace {

// Long lists of skipped or stuck jobs are cut in the summary; the counts are always whole.
constexpr size_t kListed = 20;

void add_topology(Summary& s, const SimResult& r) {
  double leaves = 0, fewest = 0;
  for (const auto& j : r.jobs) {
    leaves += j.leaves;
    fewest += j.fewest;
    if (j.leaves > j.fewest) ++s.jobs_above_fewest;
  }
  if (!r.jobs.empty()) {
    s.mean_leaves = leaves / double(r.jobs.size());
    s.mean_fewest = fewest / double(r.jobs.size());
  }
}

nlohmann::json skipped_json(const SimResult& r) {
  auto too_big = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kListed, r.too_big.size()); ++i) {
    const auto& j = r.too_big[i];
    too_big.push_back({{"id", j.id}, {"line", j.line}, {"reason", j.reason}});
  }
  auto stuck = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kListed, r.never_started.size()); ++i) stuck.push_back(r.never_started[i]);
  return {{"too_big_jobs", too_big}, {"never_started_jobs", stuck}};
}

std::string id_list(const std::vector<uint64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < std::min(kListed, ids.size()); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > kListed) out += ", ...";
  return out;
}

}  // namespace

double bounded_slowdown(const JobOutcome& job) {
  return std::max(1.0, (job.wait() + job.run) / std::max(job.run, kSlowdownBound));
}

Summary summarize(const SimResult& r, size_t skipped_invalid, double wall_seconds) {
  Summary s;
  s.jobs = r.jobs.size();
  s.skipped_invalid = skipped_invalid;
  s.skipped_too_big = r.too_big.size();
  s.never_started = r.never_started.size();
  s.nodes = r.nodes;
  s.total_cores = r.total_cores;
  s.placer = r.placer;
  s.passes = r.passes;
  s.passes_skipped = r.passes_skipped;
  s.simulate_seconds = r.wall_seconds;
  s.wall_seconds = wall_seconds > 0 ? wall_seconds : r.wall_seconds;
  if (r.jobs.empty()) return s;
  s.first_submit = r.jobs.front().submit;
  s.last_end = r.jobs.front().end;
  double busy = 0, wait = 0, bsld = 0;
  for (const auto& j : r.jobs) {
    s.first_submit = std::min(s.first_submit, j.submit);
    s.last_end = std::max(s.last_end, j.end);
    busy += j.run * j.procs;
    wait += j.wait();
    s.max_wait = std::max(s.max_wait, j.wait());
    bsld += bounded_slowdown(j);
  }
  double n = double(r.jobs.size());
  s.makespan = s.last_end - s.first_submit;
  if (s.makespan > 0 && s.total_cores > 0) s.utilization = busy / (double(s.total_cores) * s.makespan);
  s.mean_wait = wait / n;
  s.mean_bounded_slowdown = bsld / n;
  add_topology(s, r);
  if (s.wall_seconds > 0) s.speedup = s.makespan / s.wall_seconds;
  return s;
}

nlohmann::json summary_json(const Summary& s, const SimResult& r) {
  return {
      {"jobs", s.jobs},
      {"skipped_invalid", s.skipped_invalid},
      {"skipped_too_big", s.skipped_too_big},
      {"never_started", s.never_started},
      {"cluster", {{"nodes", s.nodes}, {"cores", s.total_cores}, {"placer", s.placer}}},
      {"first_submit", s.first_submit},
      {"last_end", s.last_end},
      {"makespan", s.makespan},
      {"utilization", s.utilization},
      {"mean_wait", s.mean_wait},
      {"max_wait", s.max_wait},
      {"mean_bounded_slowdown", s.mean_bounded_slowdown},
      {"slowdown_bound", kSlowdownBound},
      {"leaves",
       {{"jobs_above_fewest", s.jobs_above_fewest}, {"mean_leaves", s.mean_leaves}, {"mean_fewest", s.mean_fewest}}},
      {"passes", s.passes},
      {"passes_skipped", s.passes_skipped},
      {"simulate_seconds", s.simulate_seconds},
      {"wall_seconds", s.wall_seconds},
      {"speedup", s.speedup},
      {"skipped", skipped_json(r)},
  };
}

nlohmann::json jobs_json(const SimResult& r) {
  auto out = nlohmann::json::array();
  for (const auto& j : r.jobs) {
    out.push_back({{"id", j.id},
                   {"submit", j.submit},
                   {"start", j.start},
                   {"end", j.end},
                   {"wait", j.wait()},
                   {"run", j.run},
                   {"requested", j.requested},
                   {"procs", j.procs},
                   {"nodes", j.nodes},
                   {"leaves", j.leaves},
                   {"fewest_leaves", j.fewest},
                   {"bounded_slowdown", bounded_slowdown(j)}});
  }
  return out;
}

std::string summary_text(const Summary& s, const SimResult& r) {
  std::string out = fmt::format(
      "jobs          {} simulated on {} nodes ({} cores, {} placer)\n"
      "makespan      {:.0f} s ({:.1f} days)\n"
      "utilization   {:.1f}%\n"
      "wait          mean {:.1f} s, max {:.0f} s\n"
      "slowdown      mean bounded slowdown {:.2f} (run times below {:.0f} s count as {:.0f} s)\n",
      s.jobs, s.nodes, s.total_cores, s.placer, s.makespan, s.makespan / 86400, 100 * s.utilization, s.mean_wait,
      s.max_wait, s.mean_bounded_slowdown, kSlowdownBound, kSlowdownBound);
  if (s.mean_leaves > 0)
    out += fmt::format(
        "leaves        mean {:.2f} used, {:.2f} fewest; {} jobs on more than "
        "the fewest\n",
        s.mean_leaves, s.mean_fewest, s.jobs_above_fewest);
  out += fmt::format("wall time     {:.3f} s ({} passes), {:.0f}x real time\n", s.wall_seconds, s.passes, s.speedup);
  if (s.skipped_invalid)
    out += fmt::format("skipped       {} trace lines without a run time or processor count\n", s.skipped_invalid);
  if (s.skipped_too_big) {
    std::vector<uint64_t> ids;
    for (const auto& j : r.too_big) ids.push_back(j.id);
    out += fmt::format("skipped       {} jobs larger than the cluster: {} ({})\n", s.skipped_too_big, id_list(ids),
                       r.too_big.front().reason);
  }
  if (s.never_started)
    out +=
        fmt::format("never started {} jobs (no placement ever fit): {}\n", s.never_started, id_list(r.never_started));
  return out;
}

}  // namespace corral::sim
