// `#CORRAL` directive lines at the top of a batch script: after the `#!` line, before the
// first line that is neither blank nor a comment. `#DW` lines there are Rabbit storage
// directives, taken whole (JobOptions::dw). Each line is split like a shell would
// (quotes, backslashes) and parsed with the job options parser.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli/job_options.h"
#include "util/result.h"

namespace corral::cli {

// Shell-like word splitting: blanks separate words, '...' is literal, "..." honours
// \" \\ \$ \`, a backslash outside quotes escapes the next character, and an unquoted
// word starting with # begins a comment. An unterminated quote is an error.
Result<std::vector<std::string>> split_words(std::string_view line);

struct Directive {
  size_t line = 0;   // 1-based line number in the script
  std::string text;  // the line as written, trimmed
  std::vector<std::string> words;
};

// Errors read "LINE: TEXT: problem" (the caller adds the script's name).
Result<std::vector<Directive>> find_directives(std::string_view script);

// All directives parsed and each validated on its own, merged in order (a later line
// wins). Errors read "NAME:LINE: #CORRAL ...: problem".
Result<JobOptions> directive_options(std::string_view script, std::string_view script_name, const JobContext& ctx);

}  // namespace corral::cli
