// Command line of corral-imp, the helper that becomes the job's user before exec.
// Header-only on purpose: corral-imp links nothing but libc and the C++ runtime.
//
//   corral-imp --uid U --gid G [--cwd DIR] [--cpus LIST] [--stdin PATH]
//              [--stdout PATH] [--stderr PATH] [--env-fd N] [--status-fd N]
//              [--note-fd N] [--keep-fd N]... [--rlimit RESOURCE=VALUE]... -- COMMAND [ARG...]
//
// The agent starts the helper inside the task's cgroups (spawn_child.cc), so the task and
// everything it starts are contained from its first instruction.
// --cpus ("0-3,8") binds it to those CPUs before exec.
// An absent --stdin/--stdout/--stderr keeps the descriptor corral-imp inherited.
// --stderr equal to --stdout shares one open file. --env-fd names a descriptor holding
// the task environment as NUL-terminated KEY=VALUE strings (read from offset 0); the
// environment corral-imp itself was started with is never passed on, so a user cannot
// steer the root part of the helper (LD_PRELOAD and friends). --status-fd names a
// close-on-exec pipe: a failure is written there, a successful exec closes it silently.
// --note-fd names a descriptor whose text (the job's notes from hooks) is appended to
// the error file once it is open, so the user's file is only ever written by the user.
// --keep-fd names a descriptor the task inherits (a PMI socket); every other descriptor
// above 2 is closed before exec, whatever the parent left open. --rlimit sets the soft
// limit of RLIMIT_* number RESOURCE to VALUE (-1: unlimited), capped at the hard limit,
// once the helper is the user.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corral::node {

struct ImpArgs {
  long uid = -1;
  long gid = -1;
  std::string cwd;
  std::vector<int> cpus;
  std::optional<std::string> stdin_path, stdout_path, stderr_path;
  int env_fd = -1;
  int status_fd = -1;
  int note_fd = -1;
  std::vector<int> keep_fds;
  std::vector<std::pair<int, long long>> rlimits;  // RLIMIT_* number, soft value (-1: unlimited)
  std::vector<std::string> command;
};

namespace imp_detail {

inline bool parse_number(std::string_view text, long max, long& out) {
  if (text.empty() || text.size() > 10) return false;
  long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

// "0-3,8" -> {0,1,2,3,8}; false on anything else (CPU numbers below 65536).
inline bool parse_cpu_list(std::string_view text, std::vector<int>& out) {
  out.clear();
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (comma != std::string_view::npos && text.empty()) return false;
    size_t dash = item.find('-');
    long lo = 0, hi = 0;
    if (!parse_number(item.substr(0, dash), 65535, lo)) return false;
    hi = lo;
    if (dash != std::string_view::npos && !parse_number(item.substr(dash + 1), 65535, hi)) return false;
    if (hi < lo) return false;
    for (long c = lo; c <= hi; ++c) out.push_back(static_cast<int>(c));
  }
  return !out.empty();
}

}  // namespace imp_detail

// Returns an error message, or nullopt with `out` filled.
inline std::optional<std::string> parse_imp_args(const std::vector<std::string>& args, ImpArgs& out) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (i + 1 >= args.size()) return "option " + a + " needs a value";
    const std::string& v = args[i + 1];
    long n = 0;
    if (a == "--uid" || a == "--gid") {
      if (!imp_detail::parse_number(v, 4294967294L, n)) return "invalid " + a + " '" + v + "'";
      (a == "--uid" ? out.uid : out.gid) = n;
    } else if (a == "--env-fd" || a == "--status-fd" || a == "--note-fd" || a == "--keep-fd") {
      if (!imp_detail::parse_number(v, 1 << 20, n) || n < 3) return "invalid " + a + " '" + v + "'";
      if (a == "--keep-fd")
        out.keep_fds.push_back(static_cast<int>(n));
      else
        (a == "--env-fd" ? out.env_fd : a == "--status-fd" ? out.status_fd : out.note_fd) = static_cast<int>(n);
    } else if (a == "--rlimit") {
      const size_t eq = v.find('=');
      long resource = 0, value = 0;
      const bool unlimited = eq != std::string::npos && v.substr(eq + 1) == "-1";
      if (eq == std::string::npos || !imp_detail::parse_number(std::string_view(v).substr(0, eq), 63, resource) ||
          (!unlimited && !imp_detail::parse_number(std::string_view(v).substr(eq + 1), 999999999, value)))
        return "invalid --rlimit '" + v + "'";
      out.rlimits.emplace_back(static_cast<int>(resource), unlimited ? -1 : value);
    } else if (a == "--cwd") {
      out.cwd = v;
    } else if (a == "--cpus") {
      if (!imp_detail::parse_cpu_list(v, out.cpus)) return "invalid --cpus '" + v + "'";
    } else if (a == "--stdin") {
      out.stdin_path = v;
    } else if (a == "--stdout") {
      out.stdout_path = v;
    } else if (a == "--stderr") {
      out.stderr_path = v;
    } else {
      return "unknown option '" + a + "'";
    }
    ++i;
  }
  if (out.uid < 0) return "missing --uid";
  if (out.gid < 0) return "missing --gid";
  out.command.assign(args.begin() + static_cast<long>(i), args.end());
  if (out.command.empty()) return "missing command after --";
  return std::nullopt;
}

}  // namespace corral::node
