#include "cli/values.h"

#include <pwd.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <ctime>
#include <utility>

#include <fmt/format.h>

namespace corral::cli {

namespace {

bool parse_u64(std::string_view text, uint64_t& out) {
  if (text.empty() || text.front() == '+' || text.front() == '-') return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr std::array<std::pair<std::string_view, int>, 20> kSignals{{
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"WINCH", SIGWINCH},
}};

// Seconds per unit for "now+N<unit>".
Result<double> unit_seconds(std::string_view unit) {
  const std::string u = lower(unit);
  if (u.empty() || u == "s" || u == "sec" || u == "secs" || u == "second" || u == "seconds") return 1.0;
  if (u == "m" || u == "min" || u == "mins" || u == "minute" || u == "minutes") return 60.0;
  if (u == "h" || u == "hour" || u == "hours") return 3600.0;
  if (u == "d" || u == "day" || u == "days") return 86400.0;
  if (u == "w" || u == "week" || u == "weeks") return 604800.0;
  return invalid(fmt::format("unknown unit '{}' (use seconds, minutes, hours, days or weeks)", unit));
}

// Epoch seconds of today's (local) date at h:m:s; `next` moves a past time to tomorrow.
double local_time_of_day(double now, int h, int m, int s, bool next) {
  std::time_t t = static_cast<std::time_t>(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  double when = static_cast<double>(std::mktime(&tm));
  if (next && when <= now) {
    tm.tm_mday += 1;
    tm.tm_isdst = -1;
    when = static_cast<double>(std::mktime(&tm));
  }
  return when;
}

// "HH:MM[:SS]" into its parts; false if it is not that form.
bool parse_clock(std::string_view text, int& h, int& m, int& s) {
  h = m = s = 0;
  std::array<uint64_t, 3> parts{};
  size_t n = 0;
  while (!text.empty()) {
    if (n == parts.size()) return false;
    size_t colon = text.find(':');
    std::string_view part = text.substr(0, colon);
    if (part.size() != 2 && !(n == 0 && part.size() == 1)) return false;
    if (!parse_u64(part, parts[n++])) return false;
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
    if (text.empty()) return false;
  }
  if (n < 2 || parts[0] > 23 || parts[1] > 59 || parts[2] > 60) return false;
  h = static_cast<int>(parts[0]);
  m = static_cast<int>(parts[1]);
  s = static_cast<int>(parts[2]);
  return true;
}

// "YYYY-MM-DD[THH:MM[:SS]]".
bool parse_date(std::string_view text, double& out) {
  std::string_view date = text.substr(0, text.find('T'));
  if (date.size() != 10 || date[4] != '-' || date[7] != '-') return false;
  uint64_t y = 0, mo = 0, d = 0;
  if (!parse_u64(date.substr(0, 4), y) || !parse_u64(date.substr(5, 2), mo) || !parse_u64(date.substr(8, 2), d) ||
      mo < 1 || mo > 12 || d < 1 || d > 31)
    return false;
  int h = 0, m = 0, s = 0;
  if (date.size() < text.size() && !parse_clock(text.substr(11), h, m, s)) return false;
  std::tm tm{};
  tm.tm_year = static_cast<int>(y) - 1900;
  tm.tm_mon = static_cast<int>(mo) - 1;
  tm.tm_mday = static_cast<int>(d);
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return false;
  out = static_cast<double>(t);
  return true;
}

Result<double> parse_relative(std::string_view rest, double now, std::string_view text) {
  size_t digits = 0;
  while (digits < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[digits])) || rest[digits] == '.'))
    ++digits;
  double amount = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + digits, amount);
  if (digits == 0 || ec != std::errc() || p != rest.data() + digits)
    return invalid(fmt::format("--begin: expected now+COUNT[UNIT], got '{}'", text));
  auto unit = unit_seconds(rest.substr(digits));
  if (!unit) return invalid(fmt::format("--begin: '{}': {}", text, unit.message()));
  return now + amount * *unit;
}

}  // namespace

Result<unsigned> parse_in_range(std::string_view option, std::string_view text, unsigned lo, unsigned hi) {
  uint64_t v = 0;
  if (!parse_u64(text, v) || v < lo || v > hi) {
    if (lo == 1 && hi == UINT32_MAX)
      return invalid(fmt::format("{}: expected a positive integer, got '{}'", option, text));
    if (lo == 0 && hi == UINT32_MAX)
      return invalid(fmt::format("{}: expected a non-negative integer, got '{}'", option, text));
    return invalid(fmt::format("{}: expected an integer from {} to {}, got '{}'", option, lo, hi, text));
  }
  return static_cast<unsigned>(v);
}

Result<unsigned> parse_positive(std::string_view option, std::string_view text) {
  return parse_in_range(option, text, 1, UINT32_MAX);
}

Result<unsigned> parse_non_negative(std::string_view option, std::string_view text) {
  return parse_in_range(option, text, 0, UINT32_MAX);
}

Result<uint64_t> parse_jobid(std::string_view text) {
  uint64_t v = 0;
  if (!parse_u64(text, v) || v == 0)
    return invalid(fmt::format("'{}' is not a job id (expected a positive integer)", text));
  return v;
}

Result<int> parse_signal(std::string_view option, std::string_view text) {
  uint64_t n = 0;
  if (parse_u64(text, n)) {
    if (n >= 1 && n < 65) return static_cast<int>(n);
    return invalid(fmt::format("{}: signal number must be 1-64, got '{}'", option, text));
  }
  std::string name(text);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (const auto& [sig_name, num] : kSignals)
    if (sig_name == name) return num;
  return invalid(fmt::format("{}: unknown signal '{}' (use a name like TERM or a number)", option, text));
}

Result<uint32_t> parse_user(std::string_view option, std::string_view text) {
  uint64_t uid = 0;
  if (parse_u64(text, uid)) {
    if (uid > UINT32_MAX) return invalid(fmt::format("{}: uid '{}' is out of range", option, text));
    return static_cast<uint32_t>(uid);
  }
  std::string name(text);
  passwd pw{};
  passwd* found = nullptr;
  std::array<char, 4096> buf{};
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found)
    return invalid(fmt::format("{}: no such user '{}'", option, text));
  return static_cast<uint32_t>(found->pw_uid);
}

Result<double> parse_begin_time(std::string_view text, double now) {
  if (text.empty()) return invalid("--begin: empty time");
  const std::string l = lower(text);
  if (l == "now") return now;
  if (l.rfind("now+", 0) == 0) return parse_relative(std::string_view(text).substr(4), now, text);
  if (l == "today") return now;
  if (l == "midnight" || l == "tomorrow") return local_time_of_day(now, 0, 0, 0, true);
  if (l == "noon") return local_time_of_day(now, 12, 0, 0, true);
  if (l == "teatime") return local_time_of_day(now, 16, 0, 0, true);
  if (text.front() == '@') {
    double epoch = 0;
    auto body = text.substr(1);
    auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), epoch);
    if (body.empty() || ec != std::errc() || p != body.data() + body.size() || epoch < 0)
      return invalid(fmt::format("--begin: expected @EPOCH-SECONDS, got '{}'", text));
    return epoch;
  }
  int h = 0, m = 0, s = 0;
  if (parse_clock(text, h, m, s)) return local_time_of_day(now, h, m, s, true);
  double when = 0;
  if (parse_date(text, when)) return when;
  return invalid(
      fmt::format("--begin: cannot understand '{}' (use now+60, now+1hour, HH:MM[:SS], "
                  "YYYY-MM-DD[THH:MM[:SS]] or @EPOCH)",
                  text));
}

std::string result_name(std::string typed) {
  for (char& c : typed) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return typed == "CANCELLED" ? "CANCELED" : typed;
}

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t pos = text.find(sep);
    std::string_view item = text.substr(0, pos);
    if (!item.empty()) out.emplace_back(item);
    if (pos == std::string_view::npos) break;
    text.remove_prefix(pos + 1);
  }
  return out;
}

bool is_valid_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

Result<std::map<std::string, std::string>> parse_export(std::string_view text,
                                                        const std::map<std::string, std::string>& env) {
  if (text.empty()) return env;
  bool all = false;
  std::map<std::string, std::string> chosen;
  for (const std::string& item : split_list(text)) {
    if (item == "ALL") {
      all = true;
      continue;
    }
    if (item == "NONE" || item == "NIL") continue;
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    if (!is_valid_env_name(name)) return invalid(fmt::format("--export: '{}' is not a valid variable name", name));
    if (eq != std::string::npos) {
      chosen[name] = item.substr(eq + 1);
    } else if (auto it = env.find(name); it != env.end()) {
      chosen[name] = it->second;
    }
  }
  if (!all) return chosen;
  std::map<std::string, std::string> merged = env;
  for (auto& [k, v] : chosen) merged[k] = v;
  return merged;
}

}  // namespace corral::cli
