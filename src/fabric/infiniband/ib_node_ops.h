// What corral-infiniband does on a node for one job (run as root by the agent as the
// infiniband hook's prolog and epilog): map each selected interface to this node's own
// device (its slot may differ from another node's of the class), enable the virtual
// functions asked for and give them the GUIDs the controller allocated, and write the
// document the job reads at $CORRAL_IB_CONFIG; the epilog undoes all of it from a record
// the prolog kept. Paths are corral's own (the agent's state directory), never a user's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fabric/infiniband/ib_fabrics.h"
#include "fabric/infiniband/ib_request.h"
#include "util/result.h"

namespace corral::fabric::infiniband {

// The sysfs tree of `node` under `root`: ROOT/NODE when that exists (a test cluster's
// virtual nodes), else ROOT.
std::string sysfs_root_for(const std::string& root, const std::string& node);
// A node's own directory under the hook's state directory (STATE/NODE): one agent may host
// several (virtual) nodes, each with its jobs' documents. STATE when the name is unsafe.
std::string node_state_dir(const std::string& state_dir, const std::string& node);
// The job's document under a node's state directory.
std::string job_document_path(const std::string& state_dir, uint64_t jobid);

// What the controller sends for one node (CORRAL_IB_JOB, JSON).
struct NodeJob {
  uint64_t jobid = 0;
  uint32_t uid = 0;
  std::vector<IbRequest> requests;
  std::vector<uint16_t> pkeys;     // per request; 0: the default partition
  std::vector<uint64_t> vf_guids;  // per request; 0 for a physical function
};
nlohmann::json to_json(const NodeJob& j);
Result<NodeJob> node_job_from_json(const nlohmann::json& j);

struct NodePaths {
  std::string sysfs_root;  // already resolved for the node
  std::string pci_ids;
  std::string state_dir;  // root-owned; documents and undo records go here
  std::string node;
};

// Configures the interfaces and writes the document (owned by the job's user, mode 0400).
// Returns the document.
Result<nlohmann::json> node_prolog(const NodePaths& p, const Fabrics& fabrics, const NodeJob& job);
// Undoes what the prolog did for `jobid` (nothing recorded: nothing to do).
Status node_epilog(const NodePaths& p, uint64_t jobid);

}  // namespace corral::fabric::infiniband
