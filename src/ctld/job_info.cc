// JobInfo: what listings and `show job` print, built from a job record.
#include <pwd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "ctld/controller.h"

namespace corral::ctld {

std::string Controller::username(uint32_t uid) const {
  // Looking a user up reads /etc/passwd (or asks NSS); jobs of one user are many.
  if (auto it = usernames_.find(uid); it != usernames_.end()) return it->second;
  std::string name = lookup_username(uid);
  usernames_.emplace(uid, name);
  return name;
}

std::string Controller::lookup_username(uint32_t uid) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res) return pw.pw_name;
  return std::to_string(uid);
}

std::string Controller::pending_reason(uint64_t id, job::JobState state, std::string_view own,
                                       bool in_scheduler) const {
  if (!own.empty()) return std::string(own);
  std::string reason = in_scheduler ? sched_.reason(id) : std::string();
  if (reason.empty() && state == job::JobState::SCHED) reason = "Priority";
  return reason;
}

void Controller::fill_info(const JobRecord& job, v1::JobInfo* info) const {
  const auto& st = job.status;
  info->set_id(job.id);
  info->set_userid(job.userid);
  info->set_username(username(job.userid));
  info->set_name(job.spec->name);
  info->set_state(std::string(job::state_name(st.state)));
  if (st.state == job::JobState::INACTIVE) info->set_result(job::job_result(st));
  if (st.state < job::JobState::RUN && st.state != job::JobState::NEW)
    info->set_reason(pending_reason(job.id, st.state, job.reason, job.in_scheduler));
  info->set_urgency(st.urgency);
  info->set_priority(st.priority);
  info->set_t_submit(st.t_submit);
  info->set_t_run(st.t_run);
  info->set_t_cleanup(st.t_cleanup);
  info->set_t_inactive(st.t_inactive);
  if (job.R) {
    info->set_nodelist(job.R->nodelist());
    info->set_nnodes(static_cast<uint32_t>(job.R->nodes.size()));
    info->set_ncores(job.R->ncores());
    info->set_ngpus(job.R->ngpus());
  } else {
    info->set_nnodes(std::max(1u, job.spec->nnodes));  // at least one node, as squeue shows
    info->set_ncores(job.spec->ntasks * job.spec->cores_per_task);
    info->set_ngpus(job.spec->ntasks * job.spec->gpus_per_task);
  }
  info->set_ntasks(job.spec->ntasks);
  info->set_partition(job.partition);
  info->set_duration(job.spec->duration);
  info->set_waitstatus(st.finished ? st.waitstatus : -1);
  info->set_exception_type(st.exception_type);
  info->set_exception_note(st.exception_note);
  info->set_requeues(st.requeues);
  info->set_cwd(job.spec->cwd);
  for (const auto& d : job.spec->dependencies) info->add_dependencies(d);
  if (const JobSteps* js = steps_.find(job.id)) {
    if (st.state == job::JobState::RUN && st.started) info->set_stepmgr(js->stepmgr);
    info->set_cpu_seconds(js->cpu_seconds);
  }
}

}  // namespace corral::ctld
