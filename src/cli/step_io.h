// What `corral run` does with a step's output and outcome, kept free of I/O so it can be
// tested: "RANK: " labels that survive lines split across chunks, and the exit code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "steps.pb.h"

namespace corral::cli {

// Prefixes every line of each (rank, stream) with "RANK: ". A chunk may end mid-line:
// the unfinished line is held back until the chunk that ends it, so lines of different
// ranks never mix.
class LineLabeler {
 public:
  // The complete lines of `data` (with what was held back before) to write now; with
  // `eof` an unfinished last line is ended and written too.
  std::string label(uint32_t rank, bool is_stderr, std::string_view data, bool eof);
  // The unfinished lines still held back, ended, for stdout and for stderr (at the end of
  // the step, for ranks that never sent eof).
  std::pair<std::string, std::string> flush();

 private:
  std::map<std::pair<uint32_t, bool>, std::string> partial_;
};

// The exit code of `corral run` for a finished step: the tasks' code (128+N for signal
// N); 1 when the step failed without a task failing (it never started, or was refused).
int step_exit_code(const corral::v1::StepExit& exit);

// "42.3", "42.batch".
std::string step_label(uint64_t jobid, uint32_t stepid);

}  // namespace corral::cli
