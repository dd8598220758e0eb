// A cray-pals step (or a job's own tasks) on one node: the spool directory with the
// apinfo file, and the variables Cray PMI reads in each task (PALS_APID, PALS_APINFO,
// PALS_RANKID, PALS_NODEID, PALS_SPOOL_DIR, PMI_CONTROL_PORT, PMI_SHARED_SECRET).
// Started by the step launcher and the job executor alike, as node_pmi.h and
// node_pmix.h start the other MPI services. There is no server: Cray PMI bootstraps by
// itself from the file and the ports.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "node/pals/apinfo.h"
#include "node/pals/pals_spool.h"
#include "util/result.h"

namespace corral::node {

struct NodePals {
  pals::Layout layout;        // the whole step's
  std::string apid;           // "JOB.STEP", or "JOB" for a job's own tasks
  uint32_t node_index = 0;    // this node's place in `layout`, and what it runs there:
  std::string node;           // its name
  uint32_t first_rank = 0;
  uint32_t ntasks = 0;
  std::string control_ports;  // "12000,12001"; empty only for a step on one node
  std::string secret;
  std::string base;           // STATE_DIR/pals
  uid_t uid = 0;
  gid_t gid = 0;
};

class PalsNode {
 public:
  // Refuses a layout the file cannot hold, one that disagrees with this node's name and
  // ranks, and a step on several nodes without control ports (Cray PMI could not reach
  // its other nodes).
  static Result<std::unique_ptr<PalsNode>> start(NodePals pals);
  PalsNode(NodePals pals, std::unique_ptr<pals::PalsSpool> spool) : pals_(std::move(pals)), spool_(std::move(spool)) {}
  std::vector<std::string> task_env(uint32_t rank) const;
  const std::string& spool_dir() const { return spool_->dir(); }

 private:
  NodePals pals_;
  std::unique_ptr<pals::PalsSpool> spool_;
};

// STATE_DIR/pals as an absolute path; empty without a state directory.
std::string pals_base(const std::string& state_dir);

}  // namespace corral::node
