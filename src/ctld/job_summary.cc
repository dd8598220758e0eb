#include "ctld/job_summary.h"

#include <nlohmann/json.hpp>

namespace corral::ctld {

using nlohmann::json;

std::string summary_to_json(const v1::JobInfo& i) {
  json j{{"id", i.id()},
         {"userid", i.userid()},
         {"username", i.username()},
         {"name", i.name()},
         {"state", i.state()},
         {"result", i.result()},
         {"urgency", i.urgency()},
         {"priority", i.priority()},
         {"t_submit", i.t_submit()},
         {"t_run", i.t_run()},
         {"t_cleanup", i.t_cleanup()},
         {"t_inactive", i.t_inactive()},
         {"nodelist", i.nodelist()},
         {"nnodes", i.nnodes()},
         {"ntasks", i.ntasks()},
         {"ncores", i.ncores()},
         {"ngpus", i.ngpus()},
         {"partition", i.partition()},
         {"duration", i.duration()},
         {"waitstatus", i.waitstatus()},
         {"exception_type", i.exception_type()},
         {"exception_note", i.exception_note()},
         {"cwd", i.cwd()},
         {"cpu_seconds", i.cpu_seconds()},
         {"requeues", i.requeues()},
         {"dependencies", std::vector<std::string>(i.dependencies().begin(), i.dependencies().end())}};
  return j.dump();
}

bool summary_from_json(const std::string& text, v1::JobInfo* i) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  try {
    i->set_id(j.value("id", uint64_t{0}));
    i->set_userid(j.value("userid", 0u));
    i->set_username(j.value("username", ""));
    i->set_name(j.value("name", ""));
    i->set_state(j.value("state", "INACTIVE"));
    i->set_result(j.value("result", ""));
    i->set_urgency(j.value("urgency", 16u));
    i->set_priority(j.value("priority", int64_t{0}));
    i->set_t_submit(j.value("t_submit", 0.0));
    i->set_t_run(j.value("t_run", 0.0));
    i->set_t_cleanup(j.value("t_cleanup", 0.0));
    i->set_t_inactive(j.value("t_inactive", 0.0));
    i->set_nodelist(j.value("nodelist", ""));
    i->set_nnodes(j.value("nnodes", 0u));
    i->set_ntasks(j.value("ntasks", 0u));
    i->set_ncores(j.value("ncores", 0u));
    i->set_ngpus(j.value("ngpus", 0u));
    i->set_partition(j.value("partition", ""));
    i->set_duration(j.value("duration", 0.0));
    i->set_waitstatus(j.value("waitstatus", -1));
    i->set_exception_type(j.value("exception_type", ""));
    i->set_exception_note(j.value("exception_note", ""));
    i->set_cwd(j.value("cwd", ""));
    i->set_cpu_seconds(j.value("cpu_seconds", 0.0));
    i->set_requeues(j.value("requeues", 0u));
    for (const auto& d : j.value("dependencies", std::vector<std::string>{})) i->add_dependencies(d);
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

}  // namespace corral::ctld
