// The Workflow admission webhooks of DWS: the mutating one (mworkflow.kb.io) seeds a new
// workflow's status (its environment and one driver entry per directive and state the
// directive's driver watches); the validating one (vworkflow.kb.io) checks directives
// against the ruleset and the state rules: start in Proposal, advance one state at a time
// once the current one is achieved, never go back, Teardown from anywhere, identity fields
// immutable, hurry only toward Teardown. Denials are 403s with the webhook's name.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "api_error.h"
#include "storage/dws/directive_rules.h"

namespace corral::emu::dws {

inline constexpr const char* kStates[] = {"Proposal", "Setup", "DataIn", "PreRun", "PostRun", "DataOut", "Teardown"};
// Index of a state in kStates, or -1.
int state_index(const std::string& s);

class WorkflowAdmission {
 public:
  explicit WorkflowAdmission(const storage::dws::DirectiveRules& rules) : rules_(rules) {}
  // CREATE: mutates `wf` (status seed), then validates it.
  std::optional<ApiError> admit_create(nlohmann::json& wf) const;
  // UPDATE (PUT or PATCH of a workflow).
  std::optional<ApiError> admit_update(const nlohmann::json& old, const nlohmann::json& wf) const;

 private:
  const storage::dws::DirectiveRules& rules_;
};

}  // namespace corral::emu::dws
