// What a caller may see of other users' jobs. Like squeue, anyone sees a job's id, user,
// name, state, nodes and times; a job's environment, script, command line, working
// directory, output and event details are its owner's and the administrators' alone.
// `private-data = ["jobs"]` (like Slurm's PrivateData=jobs) hides other users' jobs
// altogether.
#pragma once

#include <cstdint>
#include <string>

#include "client.pb.h"
#include "common.pb.h"

namespace corral::ctld {

struct Viewer {
  uint32_t uid = 0;
  bool admin = true;
  bool others_hidden = false;  // private-data = jobs

  bool sees_details(uint32_t owner) const { return admin || owner == uid; }
  bool sees_job(uint32_t owner) const { return sees_details(owner) || !others_hidden; }
};

// Clears what only the owner may read: jobspec, working directory, event contexts.
void redact(v1::JobInfo& info);
void redact(v1::JobEvent& ev);
void redact(v1::StepInfo& step);
// An RFC 18 eventlog line with its context emptied.
std::string redact_event_line(const std::string& line);

}  // namespace corral::ctld
