#include "job/dependency.h"

#include <array>
#include <charconv>
#include <cmath>

namespace corral::job {
namespace {

constexpr std::array<std::string_view, 4> kJobSchemes = {"after", "afterany", "afterok", "afternotok"};

bool is_job_scheme(std::string_view scheme) {
  for (auto s : kJobSchemes) {
    if (s == scheme) return true;
  }
  return false;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

Error unknown_scheme(std::string_view uri, std::string_view scheme) {
  return invalid("dependency " + quoted(uri) + ": unknown type " + quoted(scheme) +
                 " (expected after, afterany, afterok, afternotok, begin-time or singleton)");
}

Result<uint64_t> parse_jobid(std::string_view uri, std::string_view text) {
  uint64_t id = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, id);
  if (text.empty() || ec != std::errc() || ptr != end || id == 0) {
    return invalid("dependency " + quoted(uri) + ": " + quoted(text) +
                   " is not a job id (expected a positive integer)");
  }
  return id;
}

Result<double> parse_timestamp(std::string_view uri, std::string_view text) {
  double t = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, t);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(t) || t < 0) {
    return invalid("dependency " + quoted(uri) + ": " + quoted(text) +
                   " is not a time (expected seconds since the epoch, e.g. 1700000000.0)");
  }
  return t;
}

// One Slurm-style item "afterok:12:13" expands to one dependency per job id.
Status parse_item(std::string_view item, std::vector<Dependency>& out) {
  auto colon = item.find(':');
  std::string_view scheme = item.substr(0, colon);
  if (!is_job_scheme(scheme)) {
    auto dep = parse_dependency_uri(item);
    if (!dep) return dep.status();
    out.push_back(*dep);
    return {};
  }
  if (colon == std::string_view::npos) {
    return invalid("dependency " + quoted(item) + ": missing job id (e.g. " + std::string(scheme) + ":12)");
  }
  std::string_view rest = item.substr(colon + 1);
  while (true) {
    auto next = rest.find(':');
    auto id = parse_jobid(item, rest.substr(0, next));
    if (!id) return id.status();
    out.push_back(Dependency{std::string(scheme), *id, 0});
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  return {};
}

}  // namespace

std::string Dependency::uri() const {
  if (scheme == "singleton") return scheme;
  if (scheme == "begin-time") {
    char buf[64];
    auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, time, std::chars_format::fixed);
    std::string t(buf, ec == std::errc() ? ptr : buf);
    // Always a float, so the URI reads as a timestamp rather than a job id.
    if (t.find('.') == std::string::npos) t += ".0";
    return scheme + ":" + t;
  }
  return scheme + ":" + std::to_string(jobid);
}

Result<Dependency> parse_dependency_uri(std::string_view uri) {
  if (uri.find('?') != std::string_view::npos) {
    return invalid("dependency " + quoted(uri) +
                   ": '?' (any of) is not supported; list dependencies with ',' (all of)");
  }
  auto colon = uri.find(':');
  std::string_view scheme = uri.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : uri.substr(colon + 1);
  if (scheme.empty()) return invalid("dependency " + quoted(uri) + ": missing type");
  if (scheme == "singleton") {
    if (!value.empty()) {
      return invalid("dependency " + quoted(uri) + ": singleton takes no value");
    }
    return Dependency{"singleton", 0, 0};
  }
  if (scheme == "begin-time") {
    auto t = parse_timestamp(uri, value);
    if (!t) return t.error();
    return Dependency{"begin-time", 0, *t};
  }
  if (!is_job_scheme(scheme)) return unknown_scheme(uri, scheme);
  if (colon == std::string_view::npos) {
    return invalid("dependency " + quoted(uri) + ": missing job id (e.g. " + std::string(scheme) + ":12)");
  }
  auto id = parse_jobid(uri, value);
  if (!id) return id.error();
  return Dependency{std::string(scheme), *id, 0};
}

Result<std::vector<Dependency>> parse_dependencies(std::string_view text) {
  if (text.find('?') != std::string_view::npos) {
    return invalid("dependency " + quoted(text) + ": '?' (any of) is not supported; only all of (',') is");
  }
  std::vector<Dependency> deps;
  std::string_view rest = text;
  if (rest.empty()) return deps;
  while (true) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.empty()) {
      return invalid("dependency list " + quoted(text) + ": empty entry between commas");
    }
    if (auto st = parse_item(item, deps); !st) return st.error();
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return deps;
}

}  // namespace corral::job
