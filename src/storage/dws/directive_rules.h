// The `#DW` rules of a DWDirectiveRule object (the NNF driver ships one named "nnf"): which
// commands exist, in which workflow states their driver works, and which arguments each
// takes. DWS's admission webhook checks every directive of a workflow against them; corral
// checks the same at submit so a bad directive is refused before the job is queued.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "storage/dws/directive.h"
#include "util/result.h"

namespace corral::storage::dws {

struct RuleDef {
  std::string key;  // a regular expression over argument names, as written ("^name$")
  std::regex key_re;
  std::string type;  // string, integer, bool, list-of-string
  std::optional<std::regex> pattern;
  std::vector<std::regex> patterns;  // list-of-string: each word matches one
  std::optional<long long> min, max;
  bool required = false;
  bool value_required = false;
  std::string unique_within;  // values unique across the workflow's directives under this tag
};

struct DirectiveRule {
  std::string command;
  std::string driver_label;
  std::vector<std::string> watch_states;  // "Proposal", "Setup", ...
  std::vector<RuleDef> defs;
};

class DirectiveRules {
 public:
  // From a DWDirectiveRule's `spec` (a list of rules).
  static Result<DirectiveRules> from_spec(const nlohmann::json& spec);
  // From a YAML or JSON file holding DWDirectiveRule objects (all of them are merged).
  static Result<DirectiveRules> load_file(const std::string& path);

  // Checks the directives of one workflow; the first error names its directive.
  Status validate(const std::vector<std::string>& directives) const;
  // The rules matching a command (more than one rule may name it).
  std::vector<const DirectiveRule*> rules_for(const std::string& command) const;
  const std::vector<DirectiveRule>& rules() const { return rules_; }

 private:
  Status check_args(const DirectiveRule& rule, const Directive& d, std::vector<std::string>& unique_seen) const;
  std::vector<DirectiveRule> rules_;
};

}  // namespace corral::storage::dws
