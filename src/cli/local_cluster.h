// A throw-away cluster on this machine for `corral start`: one corrald and a few
// corral-node agents hosting virtual nodes node0..node{N-1}, in a private directory.
// The destructor tears everything down (Shutdown rpc, SIGTERM, SIGKILL after 5 s), and
// every daemon gets PR_SET_PDEATHSIG so none outlives a killed `corral start`.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/result.h"

namespace corral::cli {

struct ClusterConfig {
  unsigned nodes = 0;
  unsigned agents = 0;  // 0: min(nodes, 4)
  unsigned cores = 4;
  unsigned gpus = 0;
  std::string memory = "16GiB";
  std::string config_file;        // passed to corrald --config
  std::vector<std::string> sets;  // passed to corrald as --set KEY=VALUE
  std::string dir;                // use (and keep) this directory; empty: a temporary one
  // Rabbit storage: corral-dws-emu (one rabbit per `nodes_per_rabbit` nodes) and
  // corral-dws-clientmountd beside the cluster, corrald's dws hook pointed at them.
  // `dws_data` holds the DWS CRDs (crd/) and the NNF ruleset (nnf-ruleset.yaml).
  bool dws = false;
  // Infiniband: every agent discovers devices under this sysfs tree (DIR/NODE when it
  // exists), and corrald's infiniband hook is turned on.
  std::string ib_sysfs;
  std::string dws_data;
  unsigned nodes_per_rabbit = 4;
};

// "rabbit0=node[0-3];rabbit1=node[4-7]" for corral-dws-emu --rabbits.
std::string rabbit_spec(unsigned nodes, unsigned per_rabbit);

// The hostlists of node0..node{nodes-1} split into `agents` contiguous, nearly equal
// parts ("node[0-3]", "node4", ...).
std::vector<std::string> split_nodes(unsigned nodes, unsigned agents);

// Where corrald and corral-node are: $CORRAL_LIBEXEC_DIR, else next to this program.
std::string libexec_dir();

class LocalCluster {
 public:
  explicit LocalCluster(ClusterConfig cfg);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Makes the directory and spawns the daemons. Call before any gRPC channel exists
  // (fork with gRPC's threads running is not safe for the child's allocations).
  Status launch();
  // Polls Ping until every node is up; `progress` lines after 2 s on a terminal.
  Status wait_until_up(double timeout_seconds);
  // A daemon that exited on its own, described with its log's tail; "" if none did.
  std::string check_daemons();
  void teardown();

  std::string uri() const { return "unix:" + dir_ + "/corrald.sock"; }
  // The cluster key every daemon is given (written by launch() unless it exists).
  std::string key_file() const { return dir_ + "/cluster.key"; }
  const std::string& dir() const { return dir_; }
  // The emulated API server's kubeconfig with --dws (empty without).
  std::string kubeconfig() const { return cfg_.dws ? dir_ + "/dws/kubeconfig" : std::string(); }

 private:
  struct Daemon {
    std::string name;
    std::string log;
    pid_t pid = -1;
  };
  Status make_dir();
  Status make_key_file();
  Status launch_dws(std::vector<std::string>& ctld);
  Status spawn(const std::string& name, const std::string& log, std::vector<std::string> argv);
  std::string describe_exit(const Daemon& d, int status) const;

  ClusterConfig cfg_;
  std::string dir_;
  bool remove_dir_ = false;
  bool torn_down_ = false;
  std::vector<Daemon> daemons_;
};

// The last `lines` lines of a file, indented, for error messages.
std::string log_tail(const std::string& path, size_t lines = 10);

}  // namespace corral::cli
