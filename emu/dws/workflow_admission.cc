#include "workflow_admission.h"

#include <fmt/format.h>

namespace corral::emu::dws {

using nlohmann::json;

namespace {

constexpr const char* kValidating = "vworkflow.kb.io";

ApiError deny(const std::string& msg) { return webhook_denied(kValidating, msg); }

std::vector<std::string> directives_of(const json& wf) {
  std::vector<std::string> out;
  const auto& spec = wf.at("spec");
  if (spec.contains("dwDirectives") && spec["dwDirectives"].is_array())
    for (const auto& d : spec["dwDirectives"])
      if (d.is_string()) out.push_back(d.get<std::string>());
  return out;
}

}  // namespace

int state_index(const std::string& s) {
  for (int i = 0; i < 7; ++i)
    if (s == kStates[i]) return i;
  return -1;
}

std::optional<ApiError> WorkflowAdmission::admit_create(json& wf) const {
  if (!wf.contains("spec") || !wf["spec"].is_object()) return std::nullopt;  // the schema reports it
  const json& spec = wf["spec"];
  std::string desired = spec.value("desiredState", "");
  if (desired != "Proposal")
    return deny(fmt::format("Spec.DesiredState: Invalid value: \"{}\": desired state must start in Proposal", desired));
  if (spec.value("hurry", false)) return deny("Spec.Hurry: Forbidden: the hurry flag may not be set on creation");
  if (wf.contains("status") && wf["status"].is_object() && !wf["status"].value("state", "").empty())
    return deny("Status.State: Forbidden: the status state may not be set on creation");
  if (rules_.rules().empty()) return deny("unable to find ruleset in namespace");
  auto directives = directives_of(wf);
  if (auto st = rules_.validate(directives); !st) return deny(st.message());
  // mworkflow.kb.io: the environment DWS gives every workflow, and the driver entries.
  json status = {{"ready", false}};
  status["env"] = {{"DW_WORKFLOW_NAME", wf["metadata"].value("name", "")},
                   {"DW_WORKFLOW_NAMESPACE", wf["metadata"].value("namespace", "default")}};
  json drivers = json::array();
  for (size_t i = 0; i < directives.size(); ++i) {
    auto d = storage::dws::parse_directive(directives[i]);
    if (!d) continue;
    for (const auto* r : rules_.rules_for(d->command))
      for (const auto& s : r->watch_states)
        drivers.push_back({{"driverID", r->driver_label.empty() ? std::string("nnf") : r->driver_label},
                           {"taskID", ""},
                           {"dwdIndex", static_cast<int>(i)},
                           {"watchState", s},
                           {"lastHB", 0},
                           {"completed", false},
                           {"status", "Pending"}});
  }
  status["drivers"] = std::move(drivers);
  wf["status"] = std::move(status);
  return std::nullopt;
}

std::optional<ApiError> WorkflowAdmission::admit_update(const json& old, const json& wf) const {
  if (!wf.contains("spec") || !wf["spec"].is_object() || !old.contains("spec")) return std::nullopt;
  const json& spec = wf["spec"];
  const json& ospec = old["spec"];
  std::string desired = spec.value("desiredState", "");
  if (spec.value("hurry", false) && desired != "Teardown")
    return deny("Spec.Hurry: Forbidden: the hurry flag may only be set when the desired state is Teardown");
  for (const auto& [field, label] :
       {std::pair{"wlmID", "WLMID"}, std::pair{"jobID", "JobID"}, std::pair{"userID", "UserID"},
        std::pair{"groupID", "GroupID"}, std::pair{"dwDirectives", "DWDirectives"}}) {
    json a = ospec.contains(field) ? ospec[field] : json(), b = spec.contains(field) ? spec[field] : json();
    if (a != b) return deny(fmt::format("Spec.{}: Invalid value: {}: field is immutable", label, b.dump()));
  }
  const json empty = json::object();
  const json& ostatus = old.contains("status") && old["status"].is_object() ? old["status"] : empty;
  std::string state = ostatus.value("state", "");
  bool ready = ostatus.value("ready", false);
  if (wf.contains("status") && wf["status"].contains("drivers") && ostatus.contains("drivers")) {
    const auto& nd = wf["status"]["drivers"];
    const auto& od = ostatus["drivers"];
    for (size_t i = 0; i < nd.size() && i < od.size(); ++i) {
      if (od[i].value("watchState", "") != state && nd[i] != od[i])
        return deny(
            fmt::format("Status.Drivers[{}]: Forbidden: only the current state's driver entries may change", i));
      if (od[i].value("completed", false) && !nd[i].value("completed", false))
        return deny(
            fmt::format("Status.Drivers[{}].Completed: Forbidden: a completed driver may not be uncompleted", i));
      if (nd[i].value("completed", false) &&
          (nd[i].value("status", "") != "Completed" || !nd[i].value("error", "").empty()))
        return deny(fmt::format(
            "Status.Drivers[{}]: Invalid value: a completed driver must have status Completed and no error", i));
    }
  }
  if (desired == ospec.value("desiredState", "")) return std::nullopt;  // no transition asked
  if (state.empty() && desired == "Proposal") return std::nullopt;
  if (desired == "Teardown") return std::nullopt;
  if (desired == state) return std::nullopt;
  int from = state_index(state), to = state_index(desired);
  if (from == 6 || (to >= 0 && to < from))
    return deny(
        fmt::format("Spec.DesiredState: Invalid value: \"{}\": DesiredState cannot progress backwards", desired));
  if (to != from + 1)
    return deny(fmt::format("Spec.DesiredState: Invalid value: \"{}\": states cannot be skipped", desired));
  if (!ready)
    return deny(fmt::format("Status.State: Invalid value: \"{}\": current desired state not yet achieved", state));
  return std::nullopt;
}

}  // namespace corral::emu::dws
