// `corral submit --jobspec FILE`: a ready-made jobspec (RFC 25, JSON or YAML) read from a
// file or stdin and validated here, so a bad document is reported by field before
// anything is sent.
#pragma once

#include <string>

#include "job/jobspec.h"
#include "util/result.h"

namespace corral::cli {

// Reads `path` ("-" is stdin) and validates it. Errors start with the file's name:
// "job.json: resources[0].count: must be a positive integer, got 0". An unreadable file
// is Errc::io_error, a bad document Errc::invalid_argument.
Result<job::Jobspec> read_jobspec_file(const std::string& path);

}  // namespace corral::cli
