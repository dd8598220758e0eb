// A cray-pals step (or a job's own tasks) on this agent's nodes: the spool directory with
// the apinfo file on each, and the variables Cray PMI reads in each task (PALS_APID,
// PALS_APINFO, PALS_RANKID, PALS_NODEID, PALS_SPOOL_DIR, PMI_CONTROL_PORT,
// PMI_SHARED_SECRET). Started by the step launcher and the job executor alike, as
// node_pmi.h and node_pmix.h start the other MPI services. There is no server: Cray PMI
// bootstraps by itself from the file and the ports.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "node/pals/apinfo.h"
#include "node/pals/pals_spool.h"
#include "util/result.h"

namespace corral::node {

// What every node of the step has alike.
struct PalsStepInfo {
  pals::Layout layout;        // the whole step's
  std::string apid;           // "JOB.STEP", or "JOB" for a job's own tasks
  std::string control_ports;  // "12000,12001"; empty only for a step on one node
  std::string secret;
  std::string base;           // STATE_DIR/pals, absolute
  uid_t uid = 0;
  gid_t gid = 0;
};

// The fields of a launch message (LaunchTasksRequest for a step, StartJob for a job's own
// tasks: they carry the layout and the PALS fields under the same names).
template <typename Launch>
PalsStepInfo pals_step_info(const Launch& m, std::string apid, std::string base, uid_t uid, gid_t gid) {
  return {{{m.layout_nodes().begin(), m.layout_nodes().end()}, {m.layout_tasks().begin(), m.layout_tasks().end()},
           m.pals_cpus_per_task()},
          std::move(apid),
          m.pals_control_ports(),
          m.pals_secret(),
          std::move(base),
          uid,
          gid};
}

class PalsNode;

// A step checked, and its apinfo file made, once for all of this agent's nodes.
class PalsStep : public std::enable_shared_from_this<PalsStep> {
 public:
  // Refuses a layout the file cannot hold, a base that is not absolute, and a step on
  // several nodes without control ports (Cray PMI could not reach its other nodes).
  static Result<std::shared_ptr<const PalsStep>> make(PalsStepInfo info);
  PalsStep(PalsStepInfo info, std::string apinfo);

  // Node `node`, the layout's `index`-th, running ranks first_rank.. (ntasks of them):
  // its spool directory made; refused when the layout says otherwise.
  Result<std::unique_ptr<PalsNode>> start_node(uint32_t index, const std::string& node, uint32_t first_rank,
                                               uint32_t ntasks) const;
  // Where `node` stands in the layout (a job's nodes are found by name).
  std::optional<uint32_t> index_of(const std::string& node) const;
  const PalsStepInfo& info() const { return info_; }

 private:
  PalsStepInfo info_;
  std::string apinfo_;
  std::vector<uint32_t> first_rank_;  // of each node
  std::unordered_map<std::string, uint32_t> index_;
};

class PalsNode {
 public:
  PalsNode(std::shared_ptr<const PalsStep> step, uint32_t index, std::unique_ptr<pals::PalsSpool> spool)
      : step_(std::move(step)), index_(index), spool_(std::move(spool)) {}
  std::vector<std::string> task_env(uint32_t rank) const;
  const std::string& spool_dir() const { return spool_->dir(); }

 private:
  std::shared_ptr<const PalsStep> step_;
  uint32_t index_;
  std::unique_ptr<pals::PalsSpool> spool_;
};

// STATE_DIR/pals as an absolute path; empty without a state directory.
std::string pals_base(const std::string& state_dir);

}  // namespace corral::node
