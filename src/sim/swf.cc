#include "sim/swf.h"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

namespace corral::sim {
namespace {

constexpr size_t kFields = 18;
constexpr std::array<std::string_view, kFields> kFieldNames = {"job number",
                                                               "submit time",
                                                               "wait time",
                                                               "run time",
                                                               "allocated processors",
                                                               "average CPU time",
                                                               "used memory",
                                                               "requested processors",
                                                               "requested time",
                                                               "requested memory",
                                                               "status",
                                                               "user",
                                                               "group",
                                                               "executable",
                                                               "queue",
                                                               "partition",
                                                               "preceding job",
                                                               "think time"};

// Field numbers as the SWF definition counts them (1-based).
enum Field : size_t { kJob = 1, kSubmit = 2, kRun = 4, kAllocProcs = 5, kReqProcs = 8, kReqTime = 9 };

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

class LineParser {
 public:
  LineParser(const std::string& file, unsigned line) : file_(file), line_(line) {}

  Error error(const std::string& problem) const { return invalid(fmt::format("{}:{}: {}", file_, line_, problem)); }

  Result<std::array<double, kFields>> numbers(const std::vector<std::string_view>& fields) const {
    if (fields.size() != kFields)
      return error(fmt::format("expected {} fields (SWF job line), found {}", kFields, fields.size()));
    std::array<double, kFields> out{};
    for (size_t i = 0; i < kFields; ++i) {
      std::string_view f = fields[i];
      if (!f.empty() && f.front() == '+') f.remove_prefix(1);
      auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), out[i]);
      if (ec != std::errc() || end != f.data() + f.size() || !std::isfinite(out[i]))
        return error(fmt::format("field {} ({}) is not a number: '{}'", i + 1, kFieldNames[i], fields[i]));
    }
    return out;
  }

  Result<uint64_t> whole(double v, Field f, double max) const {
    if (v < 0 || v > max || v != std::floor(v))
      return error(fmt::format("field {} ({}) must be a whole number from 0 to {:.0f}, not {}", size_t(f),
                               kFieldNames[f - 1], max, v));
    return static_cast<uint64_t>(v);
  }

 private:
  const std::string& file_;
  unsigned line_;
};

// Fills a job from its fields; a job the simulation cannot use comes back with procs == 0.
Result<SwfJob> to_job(const std::array<double, kFields>& v, const LineParser& p, unsigned line) {
  auto at = [&](Field f) { return v[f - 1]; };
  SwfJob job;
  job.line = line;
  auto id = p.whole(at(kJob), kJob, 9.007e15);
  if (!id) return id.error();
  job.id = *id;
  if (at(kSubmit) < 0) return p.error("field 2 (submit time) is unknown or negative");
  job.submit = at(kSubmit);
  job.run = at(kRun);
  double procs = at(kReqProcs) > 0 ? at(kReqProcs) : at(kAllocProcs);
  if (job.run < 0 || procs <= 0) return job;  // skipped by the caller
  auto n = p.whole(procs, at(kReqProcs) > 0 ? kReqProcs : kAllocProcs, std::numeric_limits<unsigned>::max());
  if (!n) return n.error();
  job.procs = static_cast<unsigned>(*n);
  job.requested = at(kReqTime) > 0 ? at(kReqTime) : job.run;
  return job;
}

}  // namespace

Result<SwfTrace> parse_swf(std::string_view text, const std::string& file, size_t limit) {
  SwfTrace trace;
  unsigned lineno = 0;
  size_t pos = 0;
  while (pos < text.size() && (limit == 0 || trace.jobs.size() < limit)) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lineno;
    size_t first = 0;
    while (first < line.size() && is_space(line[first])) ++first;
    if (first == line.size()) continue;
    if (line[first] == ';') {
      trace.header.emplace_back(line.substr(first + 1));
      continue;
    }
    LineParser p(file, lineno);
    auto values = p.numbers(split_fields(line));
    if (!values) return values.error();
    auto job = to_job(*values, p, lineno);
    if (!job) return job.error();
    if (job->procs == 0) {
      ++trace.skipped;
      continue;
    }
    trace.jobs.push_back(*job);
  }
  return trace;
}

Result<SwfTrace> load_swf(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot read trace '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("error reading trace '{}'", path));
  return parse_swf(text.str(), path, limit);
}

}  // namespace corral::sim
