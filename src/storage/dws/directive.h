// One `#DW` directive ("#DW jobdw type=xfs capacity=10GiB name=scratch"), tokenized the way
// DWS does: whitespace separated, the command first, then key=value arguments split at the
// first '='. There is no quoting: a value cannot hold a space.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace corral::storage::dws {

struct Directive {
  std::string text;     // as written
  std::string command;  // "jobdw"
  // In order; a bare key (no '=') has no value.
  std::vector<std::pair<std::string, std::optional<std::string>>> args;

  // The value of `key`, or nullopt when absent or bare.
  std::optional<std::string> arg(std::string_view key) const;
};

// The error names the directive and what is wrong with it.
Result<Directive> parse_directive(std::string_view text);

// A DWS capacity ("10GiB", "500MB", "1TiB") in bytes: K/M/G/T/P are powers of 1000,
// Ki/Mi/Gi/Ti/Pi powers of 1024, a trailing "B" is optional. Zero is refused.
Result<uint64_t> parse_capacity(std::string_view text);

}  // namespace corral::storage::dws
