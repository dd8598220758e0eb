#include "job/rlimit.h"

#include <sys/resource.h>

#include <array>
#include <utility>

namespace corral::job {

namespace {
constexpr std::array<std::pair<std::string_view, int>, 10> kLimits{{
    {"as", RLIMIT_AS},
    {"core", RLIMIT_CORE},
    {"cpu", RLIMIT_CPU},
    {"data", RLIMIT_DATA},
    {"fsize", RLIMIT_FSIZE},
    {"memlock", RLIMIT_MEMLOCK},
    {"nofile", RLIMIT_NOFILE},
    {"nproc", RLIMIT_NPROC},
    {"rss", RLIMIT_RSS},
    {"stack", RLIMIT_STACK},
}};
}  // namespace

const std::vector<std::string_view>& rlimit_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [name, r] : kLimits) v.push_back(name);
    return v;
  }();
  return names;
}

std::optional<int> rlimit_resource(std::string_view name) {
  for (const auto& [n, r] : kLimits)
    if (n == name) return r;
  return std::nullopt;
}

}  // namespace corral::job
