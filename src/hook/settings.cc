#include "hook/settings.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "util/units.h"

namespace corral::hook {

std::optional<TableKey> table_key(const std::string& key) {
  const size_t open = key.find('[');
  const size_t close = key.find("].", open == std::string::npos ? 0 : open);
  if (open == std::string::npos || open == 0 || close == std::string::npos || close == open + 1) return std::nullopt;
  TableKey t{key.substr(0, open), 0, key.substr(close + 2)};
  for (size_t i = open + 1; i < close; ++i) {
    if (key[i] < '0' || key[i] > '9' || t.index > kMaxSettingTables) return std::nullopt;
    t.index = t.index * 10 + static_cast<size_t>(key[i] - '0');
  }
  if (t.field.empty()) return std::nullopt;
  return t;
}

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
