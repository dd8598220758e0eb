#include "storage/dws/directive.h"

#include <cctype>
#include <limits>

namespace corral::storage::dws {
namespace {

std::vector<std::string_view> split_space(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::optional<std::string> Directive::arg(std::string_view key) const {
  for (const auto& [k, v] : args)
    if (k == key) return v;
  return std::nullopt;
}

Result<Directive> parse_directive(std::string_view text) {
  Directive d;
  d.text = std::string(text);
  auto words = split_space(text);
  if (words.empty() || words[0] != "#DW") return invalid("missing '#DW' prefix in directive '" + d.text + "'");
  if (words.size() < 2) return invalid("no command in directive '" + d.text + "'");
  d.command = std::string(words[1]);
  for (size_t i = 2; i < words.size(); ++i) {
    auto w = words[i];
    auto eq = w.find('=');
    std::string key(w.substr(0, eq));
    if (key.empty()) return invalid("an argument without a name in directive '" + d.text + "'");
    for (const auto& [k, v] : d.args)
      if (k == key) return invalid("repeated argument '" + key + "' in directive '" + d.text + "'");
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(w.substr(eq + 1));
    d.args.emplace_back(std::move(key), std::move(value));
  }
  return d;
}

Result<uint64_t> parse_capacity(std::string_view text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    unsigned digit = static_cast<unsigned>(text[i] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return invalid("capacity '" + std::string(text) + "' is too large");
    n = n * 10 + digit;
    ++i;
  }
  if (i == 0) return invalid("capacity '" + std::string(text) + "' does not start with a number");
  std::string_view unit = text.substr(i);
  if (!unit.empty() && unit.back() == 'B') unit.remove_suffix(1);
  static constexpr std::string_view kPrefixes = "KMGTP";
  uint64_t scale = 1;
  if (!unit.empty()) {
    auto p = kPrefixes.find(unit[0]);
    bool binary = unit.size() == 2 && unit[1] == 'i';
    if (p == std::string_view::npos || (unit.size() != 1 && !binary))
      return invalid("capacity '" + std::string(text) +
                     "' has an unknown unit (use KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
    for (size_t k = 0; k <= p; ++k) scale *= binary ? 1024 : 1000;
  }
  if (n == 0) return invalid("'capacity' must be a non-zero value");
  if (n > std::numeric_limits<uint64_t>::max() / scale)
    return invalid("capacity '" + std::string(text) + "' is too large");
  return n * scale;
}

}  // namespace corral::storage::dws
