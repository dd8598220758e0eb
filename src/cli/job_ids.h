// Job ids from positional arguments ("12", "12,13", "12 13").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace corral::cli {

// Parses every id or exits 2 naming the bad one.
std::vector<uint64_t> parse_jobids_or_exit(std::string_view cmd, const std::vector<std::string>& words);

}  // namespace corral::cli
