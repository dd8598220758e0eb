// The part of submit, run and batch after the options are parsed: the jobspec is built
// and validated locally (so a bad request never reaches the controller), then sent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client/client.h"
#include "cli/job_options.h"

namespace corral::cli {

// Where a submitted or batch job's output goes without -o (Slurm's slurm-%j.out).
inline constexpr const char* kDefaultJobOutput = "corral-%j.out";

// Options every submitting command has besides the job options.
struct SubmitFlags {
  bool dry_run = false;  // print the jobspec, send nothing
  bool verbose = false;
};

// Builds the request. The options were checked when they were parsed; the jobspec made of
// them is read back here (a jobspec error is a usage error, exit 2) only for --dry-run,
// which prints it: otherwise corrald reads it, and says the same of it (exit 1), once per
// submission rather than twice.
pb::SubmitRequest build_submit_request(std::string_view cmd, const ParsedJob& job, const SubmitFlags& flags);

// Prints the jobspec (--dry-run) and returns true, or returns false to go on.
bool dry_run(const SubmitFlags& flags, const pb::SubmitRequest& req);

// Sends the request; rpc errors exit 1.
std::vector<uint64_t> submit_request(Client& client, std::string_view cmd, const SubmitFlags& flags,
                                     const pb::SubmitRequest& req);

// Reads the job options into a ParsedJob or exits 2 naming the bad option.
ParsedJob parse_or_exit(std::string_view cmd, const JobOptions& opts, const JobContext& ctx);

}  // namespace corral::cli
