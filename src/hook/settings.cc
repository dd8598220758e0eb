#include "hook/settings.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "util/units.h"

namespace corral::hook {

Status read_string(const Setting& s, std::string& out) {
  if (s.kind != Setting::Kind::string) return invalid(fmt::format("{}: expected a string", s.where));
  out = s.text;
  return {};
}

Status read_bool(const Setting& s, bool& out) {
  if (s.kind != Setting::Kind::boolean) return invalid(fmt::format("{}: expected true or false", s.where));
  out = s.text == "true";
  return {};
}

Status read_uint(const Setting& s, unsigned& out, unsigned max) {
  const auto fail = [&] { return invalid(fmt::format("{}: expected an integer from 0 to {}", s.where, max)); };
  if (s.kind != Setting::Kind::integer || s.text.empty() || s.text[0] == '-') return fail();
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return fail();
  out = static_cast<unsigned>(v);
  return {};
}

Status read_duration(const Setting& s, double& out) {
  if (s.kind == Setting::Kind::integer || s.kind == Setting::Kind::floating) {
    char* end = nullptr;
    const double v = std::strtod(s.text.c_str(), &end);
    if (*end != '\0' || !(v >= 0)) return invalid(fmt::format("{}: must not be negative", s.where));
    out = v;
    return {};
  }
  if (s.kind != Setting::Kind::string) return invalid(fmt::format("{}: expected a duration such as \"30s\"", s.where));
  auto d = parse_duration(s.text);
  if (!d) return invalid(fmt::format("{}: {}", s.where, d.message()));
  out = *d;
  return {};
}

Error unknown_key(const Setting& s) { return invalid(fmt::format("{}: unknown key", s.where)); }

}  // namespace corral::hook
