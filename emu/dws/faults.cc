#include "faults.h"

#include <fmt/format.h>

namespace corral::emu::dws {

using nlohmann::json;

Status FaultTable::set(const json& doc) {
  if (!doc.is_object() || !doc.contains("faults") || !doc["faults"].is_array())
    return invalid("expected {\"faults\": [...]}");
  std::vector<Fault> out;
  for (size_t i = 0; i < doc["faults"].size(); ++i) {
    const json& j = doc["faults"][i];
    if (!j.is_object()) return invalid(fmt::format("fault {} is not an object", i));
    try {
      Fault f;
      f.workflow = j.value("workflow", "*");
      if (j.contains("jobID")) f.job_id = j["jobID"].is_string() ? j["jobID"].get<std::string>() : j["jobID"].dump();
      f.state = j.value("state", "*");
      f.delay = j.value("delay", 0.0);
      f.status = j.value("status", "");
      f.message = j.value("message", "");
      f.duration = j.value("duration", 0.0);
      f.mount_fail = j.value("mountFail", "");
      f.times = j.value("times", -1);
      if (!f.status.empty() && f.status != "TransientCondition" && f.status != "Error")
        return invalid(fmt::format("fault {}: status must be TransientCondition or Error", i));
      out.push_back(std::move(f));
    } catch (const json::exception& e) {
      return invalid(fmt::format("fault {}: {}", i, e.what()));
    }
  }
  std::lock_guard lk(mu_);
  faults_ = std::move(out);
  hits_.clear();
  return {};
}

json FaultTable::to_json() const {
  std::lock_guard lk(mu_);
  json a = json::array();
  for (const auto& f : faults_)
    a.push_back({{"workflow", f.workflow},
                 {"jobID", f.job_id},
                 {"state", f.state},
                 {"delay", f.delay},
                 {"status", f.status},
                 {"message", f.message},
                 {"duration", f.duration},
                 {"mountFail", f.mount_fail},
                 {"times", f.times}});
  return {{"faults", a}};
}

std::optional<Fault> FaultTable::match(const std::string& name, const std::string& job_id, const std::string& state) {
  std::lock_guard lk(mu_);
  for (size_t i = 0; i < faults_.size(); ++i) {
    auto& f = faults_[i];
    if (f.workflow != "*" && f.workflow != name) continue;
    if (!f.job_id.empty() && f.job_id != job_id) continue;
    if (f.state != "*" && f.state != state) continue;
    std::string hit = fmt::format("{}/{}/{}", i, name, state);
    bool counted = hits_.count(hit) > 0;
    if (!counted) {
      if (f.times == 0) continue;
      if (f.times > 0) --f.times;
      hits_.insert(hit);
    }
    return f;
  }
  return std::nullopt;
}

}  // namespace corral::emu::dws
