// The summary stored for a finished job (what listings show once it is INACTIVE), as a
// JSON object with the JobInfo field names. Written by hand rather than through
// protobuf's JSON converter, which costs several times more per job.
#pragma once

#include <string>

#include "client.pb.h"

namespace corral::ctld {

std::string summary_to_json(const v1::JobInfo& info);
bool summary_from_json(const std::string& text, v1::JobInfo* info);

}  // namespace corral::ctld
