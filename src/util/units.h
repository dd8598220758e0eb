// Durations and sizes as users write them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral {

// Flux Standard Duration: "30s", "5m", "1.5h", "2d", "0.5ms", a bare number = seconds,
// "inf"/"infinity"/"unlimited" = 0 (no limit). Returns seconds.
Result<double> parse_duration(std::string_view text);

// Slurm's --time forms: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS",
// and "UNLIMITED"/"INFINITE" (= 0); anything with a unit suffix is parsed as FSD.
Result<double> parse_time_limit(std::string_view text);

// "1.5h" style output: the shortest exact FSD form ("90s" -> "1.5m").
std::string format_duration(double seconds);
// "1:30:00", "2-00:00:00" like Slurm's squeue TIME column.
std::string format_elapsed(double seconds);

// Sizes: "1024", "10K", "10KB" (1000), "10KiB" (1024), M/G/T/P likewise; suffix case
// insensitive; a bare K/M/G/T/P is binary (Slurm's convention). Returns bytes.
Result<uint64_t> parse_size(std::string_view text);
// Like parse_size but a bare number is in `default_unit` bytes (Slurm --mem: MiB).
Result<uint64_t> parse_size(std::string_view text, uint64_t default_unit);
std::string format_size(uint64_t bytes);  // "10GiB", "1.5MiB", "512B"

}  // namespace corral
