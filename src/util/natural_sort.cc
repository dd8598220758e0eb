#include "util/natural_sort.h"

#include <cstddef>

namespace corral {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

size_t digit_run_end(std::string_view s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}

// Compares two digit runs by numeric value without converting, so any length works.
int compare_numbers(std::string_view x, std::string_view y) {
  size_t zx = x.find_first_not_of('0');
  size_t zy = y.find_first_not_of('0');
  x = zx == std::string_view::npos ? std::string_view() : x.substr(zx);
  y = zy == std::string_view::npos ? std::string_view() : y.substr(zy);
  if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
  int c = x.compare(y);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

}  // namespace

int natural_compare(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  int padding_tie = 0;  // decides only when everything else is equal
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      size_t ei = digit_run_end(a, i), ej = digit_run_end(b, j);
      std::string_view x = a.substr(i, ei - i), y = b.substr(j, ej - j);
      if (int c = compare_numbers(x, y); c != 0) return c;
      if (padding_tie == 0 && x.size() != y.size()) padding_tie = x.size() < y.size() ? -1 : 1;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) {
      return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]) ? -1 : 1;
    }
    ++i;
    ++j;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return padding_tie;
}

}  // namespace corral
