// Jobspec (Flux RFC 25 "version 1", the canonical form of RFC 14): the request a job is
// made of. Parsed from JSON or YAML and validated; errors name the bad field by its path
// (e.g. "resources[0].count: must be a positive integer").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "job/rlimit.h"
#include "util/result.h"

namespace corral::job {

// Where a task stream goes: a file path pattern (%j %t %n %N %x %u %%), or the client.
struct OutputSpec {
  std::string path;  // empty: stream to the attached client (corral run)
};

// The fields corral acts on, extracted from the document. Everything else (hook
// options under attributes.system.shell.options, user attributes) stays in `document`.
struct Jobspec {
  // resources: RFC 25 allows "slot" under an optional "node".
  unsigned nnodes = 0;  // 0: as many as needed
  unsigned ntasks = 1;  // total tasks (slot count x node count when per-node)
  unsigned cores_per_task = 1;
  unsigned gpus_per_task = 0;
  uint64_t mem_per_node_mb = 0;  // 0: no requirement
  bool exclusive = false;        // whole nodes

  std::vector<std::string> command;  // tasks[0].command
  std::string batch_script;          // attributes.system.batch.script; non-empty: batch job
  // attributes.system.alloc: `corral alloc`. Runs no task of its own: the job lasts until
  // its interactive step ends. Planned like a batch job (first node, one task).
  bool alloc = false;
  // attributes.system.requeue: run again when a node failure ends the run (Slurm's
  // --requeue / --no-requeue); absent: the site's [job] requeue.
  std::optional<bool> requeue;
  std::string cwd;                                 // attributes.system.cwd
  std::map<std::string, std::string> environment;  // attributes.system.environment
  double duration = 0;                             // attributes.system.duration, seconds; 0 = no limit
  std::string name;                                // attributes.system.job.name (default: command basename)
  std::string partition;                           // attributes.system.queue
  std::string requested_nodes;                     // attributes.system.constraints.hostlist (hostlist)
  std::string excluded_nodes;                      // attributes.system.constraints.exclude (hostlist)
  // attributes.system.constraints.switches {count, max_wait}: --switches=COUNT@TIME
  unsigned switches = 0;                  // at most this many leaf switches / base blocks; 0 = any
  double switch_wait = -1;                // seconds to wait for them; <0 = the site maximum
  std::vector<std::string> dependencies;  // attributes.system.dependencies: RFC 26 URIs
  double begin_time = 0;                  // attributes.system.begin-time (epoch seconds), 0 = now
  double mock_duration = -1;              // attributes.system.exec.test.run_duration; <0 = real
  OutputSpec output;                      // attributes.system.shell.options.output.stdout.path
  OutputSpec error;                       // ...stderr.path; empty path = same as stdout
  std::string input;                      // ...input.stdin.path; empty = /dev/null

  std::shared_ptr<const nlohmann::json> document;  // the whole validated document

  // attributes.system.shell.options.<key>, set by --setopt; keys may be dotted
  // ("cray-slingshot.vnicount"). Returns nullptr when absent.
  const nlohmann::json* option(std::string_view key) const;
  // The submitter's soft limits for the tasks (shell.options.rlimit); empty: inherited.
  std::vector<TaskRlimit> rlimits;
  std::string mpi;  // shell.options.mpi (--mpi, canonical: job/mpi_kind.h); empty: the site's default
};

// Parses JSON or YAML (detected from the first non-blank character) and validates.
Result<Jobspec> parse_jobspec(std::string_view text);
Result<Jobspec> jobspec_from_document(const nlohmann::json& doc);
// The canonical JSON text of a jobspec (its document, compact).
std::string jobspec_to_string(const Jobspec& spec);

// What the command line asks for; build_jobspec turns it into a document.
struct JobRequest {
  unsigned nnodes = 0;
  unsigned ntasks = 0;  // 0: one per node (or 1)
  unsigned cores_per_task = 1;
  unsigned gpus_per_task = 0;
  uint64_t mem_per_node_mb = 0;
  bool exclusive = false;
  std::vector<std::string> command;
  std::string batch_script;
  bool alloc = false;  // an allocation; without a command, ["true"] stands in
  std::optional<bool> requeue;
  std::string cwd;
  std::map<std::string, std::string> environment;
  double duration = 0;
  std::string name;
  std::string partition;
  std::string requested_nodes;
  std::string excluded_nodes;
  unsigned switches = 0;
  double switch_wait = -1;
  std::vector<std::string> dependencies;
  double begin_time = 0;
  double mock_duration = -1;
  std::string output, error, input;
  std::vector<std::pair<std::string, std::string>> options;  // --setopt key=value
  std::vector<std::pair<std::string, int64_t>> rlimits;      // name -> soft limit (-1 unlimited)
  std::vector<std::string> dw;                               // #DW directives (attributes.system.dw)
  std::vector<std::string> ib;                               // --ib values (attributes.system.infiniband)
  std::string mpi;                                           // --mpi (shell.options.mpi)
};
Result<Jobspec> build_jobspec(const JobRequest& req);
// The same document, not read back: for a client whose server reads (and checks) it anyway.
Result<std::string> build_jobspec_text(const JobRequest& req);

}  // namespace corral::job
