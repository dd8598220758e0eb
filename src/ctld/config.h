// corrald's configuration: a TOML file plus `--set section.key=value` overrides.
// docs/admin.md documents every key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hook/settings.h"
#include "net/credentials.h"
#include "util/result.h"

namespace corral::ctld {

struct PartitionConfig {
  std::string name;
  std::string nodes;  // hostlist, may use switch{}/block{} functions; empty = every node
  bool is_default = false;
  std::string topology;  // a topology of [topology].file by name; empty = its default
};

// [steps]: what the controller hands each job's step manager.
struct StepsConfig {
  unsigned fanout_width = 32;        // agents a launch-tree hop talks to; >= 2
  std::string mpi_ports;             // "12000-12999"; empty: no MPI ports
  unsigned mpi_ports_per_job = 100;  // one job's share of mpi_ports
  unsigned mpi_ports_per_step = 2;   // what each step takes from its job's share
  std::string mpi_default = "auto";  // --mpi of jobs and steps that give none (job/mpi_kind.h)
};

// Per-user limits (Slurm's MaxSubmitJobs, MaxJobs, rl_enable) and request sizes.
struct LimitsConfig {
  unsigned max_submit_jobs = 0;          // a user's jobs not yet finished; 0 = no limit
  unsigned max_running_jobs = 0;         // a user's jobs allocated or running; 0 = no limit
  double submit_rate = 0;                // a user's submissions per second, sustained; 0 = no limit
  unsigned submit_burst = 100;           // ... and how many may come at once
  uint64_t max_batch_script = 4u << 20;  // bytes of a batch script
  uint64_t max_jobspec = 8u << 20;       // bytes of a whole jobspec (script included)
};

struct Config {
  // [controller]
  std::string socket = "/run/corral/corrald.sock";
  // TCP addresses ("0.0.0.0:6817", "[::]:6817") served besides the socket; every request
  // there must carry a credential (net/credentials.h) of the `auth` method: from munged at
  // munge_socket, or made with the cluster key (key_file).
  std::vector<std::string> listen;
  net::AuthMethod auth = net::AuthMethod::munge;
  std::string munge_socket;       // empty: libmunge's default
  std::string tls_cert, tls_key;  // PEM files: TLS on the listen addresses (net/tls.h)
  std::string state_dir = "/var/lib/corral";
  double heartbeat_interval = 2.0;  // seconds between agent heartbeats
  double node_timeout = 30.0;       // silence after which a node is marked down
  // When most agents fall silent at once, the likelier cause is this controller's own
  // link; their nodes stay up this long (jobs go on) before they are marked down.
  double isolation_timeout = 300.0;
  double kill_grace = 10.0;  // SIGTERM -> SIGKILL on cancel and timeout
  bool sync_full = true;     // fsync every group commit
  double commit_interval = 0.002;
  std::string key_file;  // cluster key (hex); empty: <state_dir>/cluster.key
  // [job]
  std::string prolog, epilog, housekeeping;  // executables run as root on the job's nodes
  double prolog_timeout = 300, epilog_timeout = 300, housekeeping_timeout = 300;
  double default_time_limit = 0;  // applied to jobs without -t; 0 = unlimited
  double max_time_limit = 0;      // jobs asking for more are refused; 0 = no maximum
  bool requeue = false;           // jobs without --requeue/--no-requeue run again after a node failure
  unsigned max_requeue = 5;       // ...at most this many times (Slurm's MaxBatchRequeue)
  // [topology]
  std::string topology_file;     // topology.conf or topology.yaml; empty = flat placement
  double max_switch_wait = 300;  // cap on --switches=COUNT@TIME waits, seconds
  // [[partition]]
  std::vector<PartitionConfig> partitions;
  LimitsConfig limits;
  bool private_jobs = false;  // [controller] private-data = ["jobs"]: other users' jobs are hidden
  // [node]: settings every agent takes unless its command line sets them (configless)
  std::optional<uint64_t> node_job_pids_max;
  std::optional<bool> node_cpu_bind;
  // The sections hooks own ([slingshot], ...), as read: each hook checks its own
  // (ctld/hooks/registry.cc).
  std::map<std::string, hook::Settings> hook_settings;
  // [steps]
  StepsConfig steps;
};

// The text of a configuration file called `name` (empty: no file), then overrides. The
// sections named in `hook_sections` are kept as read in Config::hook_settings.
Result<Config> parse_config(std::string_view text, const std::string& name, const std::vector<std::string>& overrides,
                            const std::vector<std::string>& hook_sections = {});
// Reads `path` (may be empty: defaults only), then applies overrides "section.key=value".
// Errors name the file, the key and what is wrong.
Result<Config> load_config(const std::string& path, const std::vector<std::string>& overrides,
                           const std::vector<std::string>& hook_sections = {});

}  // namespace corral::ctld
