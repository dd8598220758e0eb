// The hook interface lives in src/hook (fabric and storage hooks use it without depending
// on the controller); the controller uses its names unqualified.
#pragma once

#include "ctld/job_record.h"
#include "hook/hook.h"
#include "hook/job_record.h"

namespace corral::ctld {
using hook::HookContext;
using hook::HookQuery;
using hook::HookRunner;
using hook::JobHook;
using hook::JobView;
using hook::PerilogOutcome;
using hook::SavedState;
}  // namespace corral::ctld
