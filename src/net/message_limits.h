// The largest message each wire interface accepts, set explicitly on both ends so that
// no connection runs into gRPC's 4 MiB default, and what a sender does about bigger ones.
#pragma once

#include <cstddef>

namespace corral::net {

// corrald -> agent. One StartJob carries the jobspec (at most limits.max-jobspec, 8 MiB by
// default), the environment and, for the step manager, a line per node of the job: a
// 100,000-node job's StartJob is about 12 MiB. Batches of commands are cut well below it.
inline constexpr size_t kMaxAgentDownMessage = 64u << 20;
inline constexpr size_t kAgentBatchBytes = 4u << 20;
// agent -> corrald: task output, exits, step records, PMI wire-up through the step
// manager (1,024 ranks x 1 KiB of keys is 1 MiB); batches are cut at kAgentBatchBytes too.
inline constexpr size_t kMaxAgentUpMessage = 64u << 20;
// corrald -> clients: a 100,000-node listing or a 100,000-job table is 15-30 MiB.
inline constexpr size_t kMaxClientReply = 256u << 20;
// clients -> corrald: a submission (jobspecs with their scripts, checked again against the
// configured limits) and the other requests.
inline constexpr size_t kMaxClientRequest = 64u << 20;

}  // namespace corral::net
