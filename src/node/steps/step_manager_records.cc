// The step manager's accounting side: StepInfo records of steps, kept until the
// controller acknowledges them, and the listing of a job's steps.
#include <fmt/format.h>

#include "job/eventlog.h"
#include "job/step_id.h"
#include "node/steps/step_manager.h"
#include "node/steps/step_manager_state.h"

namespace corral::node {

v1::StepInfo StepManager::info(const Job& job, const Step& step) const {
  v1::StepInfo i;
  i.set_jobid(job.id);
  i.set_step(job::step_name(step.id));
  i.set_userid(job.uid);
  i.set_name(step.name);
  switch (step.state) {
    case Step::State::pending:
      i.set_state("PENDING");
      break;
    case Step::State::running:
      i.set_state("RUNNING");
      break;
    case Step::State::ended:
      i.set_state(step.final_state);
      break;
  }
  i.set_nodelist(step.nodelist);
  i.set_nnodes(step.nnodes);
  i.set_ntasks(step.state == Step::State::pending ? step.req.ntasks : step.ntasks);
  i.set_ncores(step.ncores);
  i.set_t_submit(step.t_submit);
  i.set_t_start(step.t_start);
  i.set_t_end(step.t_end);
  i.set_waitstatus(step.state == Step::State::ended ? step.waitstatus : -1);
  i.set_cpu_seconds(step.cpu_seconds);
  i.set_command(step.command);
  return i;
}

// The batch script as a step: it runs on the job's first node from the job's start.
v1::StepInfo StepManager::batch_info(const Job& job) const {
  v1::StepInfo i;
  i.set_jobid(job.id);
  i.set_step(job::step_name(job::kBatchStep));
  i.set_userid(job.uid);
  i.set_name(job.name.empty() ? "batch" : job.name);
  const auto& first = job.allocator->nodes().front();
  i.set_nodelist(first.name);
  i.set_nnodes(1);
  i.set_ntasks(1);
  i.set_ncores(static_cast<uint32_t>(first.cores.count()));
  i.set_t_submit(job.t_start);
  i.set_t_start(job.t_start);
  i.set_command("batch");
  if (job.batch_waitstatus < 0) {
    i.set_state("RUNNING");
    i.set_waitstatus(-1);
  } else {
    i.set_state(job.batch_waitstatus == 0 ? "COMPLETED" : "FAILED");
    i.set_waitstatus(job.batch_waitstatus);
    i.set_t_end(job::now());
  }
  return i;
}

void StepManager::record(Job& job, v1::StepInfo info) {
  if (records_sink_) records_sink_(info);
  records_[{info.jobid(), info.step()}] = info;
  job.finished.push_back(std::move(info));
  while (job.finished.size() > config_.keep_finished) job.finished.pop_front();
}

Result<v1::ListStepsReply> StepManager::list(uint32_t uid, uint64_t jobid) const {
  v1::ListStepsReply reply;
  auto add = [&](const Job& job) {
    if (job.batch && !job.ending) *reply.add_steps() = batch_info(job);
    for (const auto& f : job.finished) *reply.add_steps() = f;
    for (const auto& [id, step] : job.steps) *reply.add_steps() = info(job, step);
  };
  if (jobid != 0) {
    const Job* job = find(jobid);
    if (job == nullptr) return no_step_manager(jobid);
    if (auto st = check_owner(*job, uid); !st) return st.error();
    add(*job);
    return reply;
  }
  for (const auto& [id, job] : jobs_)
    if (uid == 0 || job->uid == uid) add(*job);
  return reply;
}

}  // namespace corral::node
