#include "util/units.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "util/rounding.h"

namespace corral {
namespace {

constexpr double kMinute = 60;
constexpr double kHour = 3600;
constexpr double kDay = 86400;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool means_unlimited(std::string_view s) {
  std::string l = lower(s);
  return l == "inf" || l == "infinity" || l == "unlimited" || l == "infinite";
}

// A finite, non-negative decimal number using all of `s`.
std::optional<double> parse_number(std::string_view s) {
  if (s.empty() || !(is_digit(s.front()) || s.front() == '.')) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_uint(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> duration_unit(std::string_view unit) {
  if (unit.empty() || unit == "s") return 1.0;
  if (unit == "ms") return 1e-3;
  if (unit == "m") return kMinute;
  if (unit == "h") return kHour;
  if (unit == "d") return kDay;
  return std::nullopt;
}

// `v` printed with at most three decimals, if that is exact.
std::optional<std::string> short_decimal(double v) {
  double scaled = v * 1000;
  double rounded = round_nearest(scaled);
  if (std::fabs(scaled - rounded) > 1e-6 * std::max(1.0, std::fabs(scaled))) return std::nullopt;
  return fmt::format("{}", rounded / 1000);
}

// Splits Slurm's "[D-]A[:B[:C]]" into days and colon fields; nullopt if malformed.
struct SlurmTime {
  std::optional<uint64_t> days;
  std::vector<uint64_t> fields;
};

std::optional<SlurmTime> split_slurm_time(std::string_view t) {
  SlurmTime out;
  if (size_t dash = t.find('-'); dash != std::string_view::npos) {
    out.days = parse_uint(t.substr(0, dash));
    if (!out.days) return std::nullopt;
    t = t.substr(dash + 1);
  }
  while (true) {
    size_t colon = t.find(':');
    auto field = parse_uint(t.substr(0, colon));
    if (!field || out.fields.size() == 3) return std::nullopt;
    out.fields.push_back(*field);
    if (colon == std::string_view::npos) break;
    t = t.substr(colon + 1);
  }
  return out;
}

Error bad_time(std::string_view text, std::string_view why) {
  return invalid(fmt::format("invalid time limit \"{}\": {}", text, why));
}

Result<double> slurm_time_seconds(std::string_view text, const SlurmTime& st) {
  const auto& f = st.fields;
  uint64_t d = 0, h = 0, m = 0, s = 0;
  if (st.days) {
    d = *st.days;
    h = f[0];
    if (f.size() > 1) m = f[1];
    if (f.size() > 2) s = f[2];
    if (h >= 24) return bad_time(text, fmt::format("hours {} must be below 24 after days", h));
  } else if (f.size() == 1) {
    m = f[0];
  } else if (f.size() == 2) {
    m = f[0];
    s = f[1];
  } else {
    h = f[0];
    m = f[1];
    s = f[2];
  }
  bool minutes_lead = !st.days && f.size() <= 2;
  if (!minutes_lead && m >= 60) return bad_time(text, fmt::format("minutes {} must be below 60", m));
  if (f.size() >= 2 && s >= 60) return bad_time(text, fmt::format("seconds {} must be below 60", s));
  return static_cast<double>(d) * kDay + static_cast<double>(h) * kHour + static_cast<double>(m) * kMinute +
         static_cast<double>(s);
}

struct SizeUnit {
  const char* name;
  uint64_t bytes;
};

constexpr uint64_t kKi = 1024;
constexpr std::array<SizeUnit, 6> kBinary{{{"KiB", kKi},
                                           {"MiB", kKi* kKi},
                                           {"GiB", kKi* kKi* kKi},
                                           {"TiB", kKi* kKi* kKi* kKi},
                                           {"PiB", kKi* kKi* kKi* kKi* kKi},
                                           {"EiB", kKi* kKi* kKi* kKi* kKi* kKi}}};
constexpr std::array<SizeUnit, 6> kDecimal{{{"KB", 1'000},
                                            {"MB", 1'000'000},
                                            {"GB", 1'000'000'000},
                                            {"TB", 1'000'000'000'000},
                                            {"PB", 1'000'000'000'000'000},
                                            {"EB", 1'000'000'000'000'000'000}}};

// Bytes per unit for a lower-cased suffix: "k"/"kib" binary, "kb" decimal, "b" bytes.
std::optional<uint64_t> size_unit(const std::string& unit) {
  if (unit == "b") return 1;
  static constexpr std::string_view kLetters = "kmgtpe";
  if (unit.empty() || kLetters.find(unit[0]) == std::string_view::npos) return std::nullopt;
  size_t i = kLetters.find(unit[0]);
  std::string_view rest = std::string_view(unit).substr(1);
  if (rest.empty() || rest == "ib") return kBinary[i].bytes;
  if (rest == "b") return kDecimal[i].bytes;
  return std::nullopt;
}

Error bad_size(std::string_view text, std::string_view why) {
  return invalid(fmt::format("invalid size \"{}\": {}", text, why));
}

// Multiplies without wrapping; nullopt when the product does not fit in 64 bits.
std::optional<uint64_t> scale_size(std::string_view number, uint64_t unit) {
  if (number.find('.') == std::string_view::npos) {
    auto n = parse_uint(number);
    if (!n || (unit != 0 && *n > std::numeric_limits<uint64_t>::max() / unit)) return std::nullopt;
    return *n * unit;
  }
  auto v = parse_number(number);
  if (!v) return std::nullopt;
  double bytes = round_nearest(*v * static_cast<double>(unit));
  if (bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

// "1.5MiB" style text for `bytes` in `u`, if it is at least 1 and exact to two decimals.
std::optional<std::string> size_in(uint64_t bytes, const SizeUnit& u) {
  if (bytes < u.bytes) return std::nullopt;
  uint64_t whole = bytes / u.bytes, rem = bytes % u.bytes;
  // rem / u.bytes has at most two decimals iff u.bytes / gcd(u.bytes, 100) divides rem.
  uint64_t step = u.bytes / std::gcd(u.bytes, uint64_t{100});
  if (rem % step != 0) return std::nullopt;
  uint64_t hundredths = rem / step * (100 / (u.bytes / step));
  if (hundredths == 0) return fmt::format("{}{}", whole, u.name);
  if (hundredths % 10 == 0) return fmt::format("{}.{}{}", whole, hundredths / 10, u.name);
  return fmt::format("{}.{:02}{}", whole, hundredths, u.name);
}

}  // namespace

Result<double> parse_duration(std::string_view text) {
  std::string_view t = trim(text);
  if (t.empty()) return invalid("invalid duration \"\": expected a number with an optional unit");
  if (means_unlimited(t)) return 0.0;
  size_t k = t.size();
  while (k > 0 && is_alpha(t[k - 1])) --k;
  std::string_view number = t.substr(0, k), unit = t.substr(k);
  auto v = parse_number(number);
  if (!v) {
    return invalid(fmt::format("invalid duration \"{}\": \"{}\" is not a non-negative number", text, number));
  }
  auto scale = duration_unit(unit);
  if (!scale) {
    return invalid(fmt::format("invalid duration \"{}\": unknown unit \"{}\" (use ms, s, m, h or d)", text, unit));
  }
  return *v * *scale;
}

Result<double> parse_time_limit(std::string_view text) {
  std::string_view t = trim(text);
  if (t.empty()) return bad_time(text, "expected minutes, [D-]HH:MM:SS or a duration like 1.5h");
  if (means_unlimited(t)) return 0.0;
  bool slurm_form = std::all_of(t.begin(), t.end(), [](char c) { return is_digit(c) || c == ':' || c == '-'; });
  if (!slurm_form) return parse_duration(t);
  auto st = split_slurm_time(t);
  if (!st) {
    return bad_time(text, "expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS");
  }
  return slurm_time_seconds(text, *st);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  if (seconds == 0) return "0s";
  if (seconds < 0) return "-" + format_duration(-seconds);
  static constexpr std::array<std::pair<double, const char*>, 5> kUnits{
      {{kDay, "d"}, {kHour, "h"}, {kMinute, "m"}, {1.0, "s"}, {1e-3, "ms"}}};
  for (const auto& [scale, name] : kUnits) {
    double v = seconds / scale;
    if (v < 1) continue;
    if (auto text = short_decimal(v)) return *text + name;
  }
  return fmt::format("{}s", seconds);
}

std::string format_elapsed(double seconds) {
  if (!std::isfinite(seconds)) return "UNLIMITED";
  auto total = static_cast<uint64_t>(std::max(0.0, std::floor(seconds)));
  uint64_t d = total / 86400, h = total / 3600 % 24, m = total / 60 % 60, s = total % 60;
  if (d > 0) return fmt::format("{}-{:02}:{:02}:{:02}", d, h, m, s);
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{}:{:02}", m, s);
}

Result<uint64_t> parse_size(std::string_view text) { return parse_size(text, 1); }

Result<uint64_t> parse_size(std::string_view text, uint64_t default_unit) {
  std::string_view t = trim(text);
  if (t.empty()) return bad_size(text, "expected a number with an optional unit like 10GiB");
  size_t k = 0;
  while (k < t.size() && (is_digit(t[k]) || t[k] == '.')) ++k;
  std::string_view number = t.substr(0, k);
  std::string unit = lower(trim(t.substr(k)));
  auto scale = unit.empty() ? std::optional<uint64_t>(default_unit) : size_unit(unit);
  if (!scale) {
    return bad_size(text,
                    fmt::format("unknown unit \"{}\" (use B, K, KB, KiB, M, MB, MiB, ..., P)", trim(t.substr(k))));
  }
  if (!parse_number(number)) {
    return bad_size(text, fmt::format("\"{}\" is not a non-negative number", number));
  }
  auto bytes = scale_size(number, *scale);
  if (!bytes) return bad_size(text, "larger than 16 EiB");
  return *bytes;
}

std::string format_size(uint64_t bytes) {
  // The largest binary unit that is exact to two decimals, since memory is counted in
  // them; a decimal unit only when it reads shorter ("1TB", not "976562.5KiB").
  std::string binary = fmt::format("{}B", bytes);
  for (const SizeUnit& u : kBinary) {
    if (auto text = size_in(bytes, u)) binary = *text;
  }
  for (auto it = kDecimal.rbegin(); it != kDecimal.rend(); ++it) {
    if (bytes >= it->bytes && bytes % it->bytes == 0) {
      std::string decimal = fmt::format("{}{}", bytes / it->bytes, it->name);
      return decimal.size() < binary.size() ? decimal : binary;
    }
  }
  return binary;
}

}  // namespace corral
