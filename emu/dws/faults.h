// Faults and delays an operator sets from outside (POST /emu/v1/faults, or --faults FILE):
// which workflows they hit (by name, job id or every one), in which state, and what the
// driver then does: wait in DriverWait, report TransientCondition or Error with a message,
// fail a compute's mount. Rabbits going offline, watch cuts and API outages are actions on
// the admin endpoint, not rules (api_server.h).
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace corral::emu::dws {

struct Fault {
  std::string workflow = "*";  // a workflow name, or "*"
  std::string job_id;          // matches spec.jobID when set
  std::string state = "*";     // the state it hits, or "*"
  double delay = 0;            // seconds the driver stays in DriverWait first
  std::string status;          // "", "TransientCondition" or "Error"
  std::string message;
  double duration = 0;     // TransientCondition ends after this long (0: never)
  std::string mount_fail;  // a compute whose ClientMount fails in PreRun
  int times = -1;          // workflows it may still hit (-1: no limit)
};

class FaultTable {
 public:
  // Replaces the rules with those of {"faults": [...]}; errors name the bad entry.
  Status set(const nlohmann::json& doc);
  nlohmann::json to_json() const;
  // The first rule for this workflow and state; counts a hit against `times` once per
  // workflow and state.
  std::optional<Fault> match(const std::string& name, const std::string& job_id, const std::string& state);

 private:
  mutable std::mutex mu_;
  std::vector<Fault> faults_;
  std::set<std::string> hits_;  // "rule#/workflow/state" already counted
};

}  // namespace corral::emu::dws
