// What corral-slingshot does on a node, as library functions on a CxiDevice so they are
// tested without the command: the prolog's service creation (idempotent, rolled back on
// failure), the epilog's / housekeeping's / clean's destruction with retries while busy,
// and the listing admins read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fabric/slingshot/cxi_device.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

struct NicMessage {
  std::string nic;
  std::string text;
};

struct PrologRequest {
  std::vector<uint16_t> vnis;  // 1 to 4
  uint32_t uid = 0;
  uint32_t ncores = 0;  // cores the job holds on this node
};

struct PrologOutcome {
  bool ok = true;
  std::vector<NicMessage> warnings;                        // one per NIC whose reservation was scaled back
  std::vector<NicMessage> errors;                          // why it failed (and any rollback trouble)
  std::vector<std::pair<std::string, uint32_t>> created;   // NIC, service id (kept when ok)
  std::vector<std::pair<std::string, uint32_t>> existing;  // already there (idempotence)
};

// One service per NIC for the job: members {uid}, its VNIs, BEST_EFFORT|LOW_LATENCY and
// the seed's limits fitted to the NIC. A NIC that already has the job's service (not
// system, the same VNIs, members exactly {uid}) is left alone. On failure, the services
// this call created are destroyed. The error is for a device that cannot be listed.
Result<PrologOutcome> run_prolog(CxiDevice& dev, const PrologRequest& req);

// The description the prolog asks for on `nic` (exposed for tests).
ServiceDesc job_service_desc(const PrologRequest& req, const Limits& limits);

struct DestroyOptions {
  double retry_for = 10;              // seconds to keep retrying busy services
  double interval = 0.5;              // between attempts
  std::function<double()> now;        // default: a monotonic clock, seconds
  std::function<void(double)> sleep;  // default: sleeps that many seconds
};

struct PendingService {
  std::string nic;
  Service svc;
  std::string error;
};

struct DestroyOutcome {
  std::vector<std::pair<std::string, uint32_t>> destroyed;
  std::vector<PendingService> busy;    // still busy when the time was up
  std::vector<PendingService> failed;  // other errors (not retried)
};

// Destroys every service `match` selects on every NIC, retrying busy ones until
// retry_for has passed. The error is for a device that cannot be listed at the start.
Result<DestroyOutcome> destroy_matching(CxiDevice& dev, const std::function<bool(const Service&)>& match,
                                        const DestroyOptions& opts);

// The epilog's selection: not a system service and exactly the job's VNIs.
std::function<bool(const Service&)> epilog_match(std::vector<uint16_t> vnis);
// clean's: not a system service, VNI-restricted, and every VNI in `pool`.
std::function<bool(const Service&)> clean_match(std::function<bool(uint16_t)> in_pool);

// For `corral-slingshot list`: a table for people, JSON for programs.
std::string format_nics_text(const std::string& node, const std::vector<Nic>& nics);
std::string format_nics_json(const std::string& node, const std::vector<Nic>& nics);

}  // namespace corral::fabric::slingshot
