// Internal to topology/: the rules every placer shares for what a node can take and how an
// allocation is written, so flat, block and torus placements have the same form.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "placers/placement.h"

namespace corral::topology {

inline unsigned cores_per_task(const Request& r) { return r.cores_per_task > 0 ? r.cores_per_task : 1; }

inline unsigned free_core_count(const NodeState& st) { return static_cast<unsigned>(st.free_cores.count()); }

// How many of the request's tasks `st` can take now; 0 if it cannot take the job at all
// (not usable, held exclusively, busy for an exclusive job, short of memory).
unsigned task_capacity(const Request& r, const NodeState& st);

// The `n` lowest ids of `ids`: deterministic choices make R predictable.
IdSet lowest(const IdSet& ids, uint64_t n);

// One node's share: an exclusive job owns the whole node, others the lowest free ids.
NodeShare make_share(const Request& r, const NodeState& st, uint32_t node, unsigned ntasks);

// Node ids sorted and without duplicates, and membership in such a list.
std::vector<uint32_t> sorted_unique(std::vector<uint32_t> ids);
bool in_sorted(const std::vector<uint32_t>& sorted, uint32_t id);

// A node a placement may use and what it could take.
struct Candidate {
  uint32_t node = 0;
  unsigned cap = 0;   // tasks it can take
  unsigned free = 0;  // free cores
};
// Tight packing: fewer free cores first, then the lower index.
bool tighter(const Candidate& a, const Candidate& b);
// Most tasks first, then the lower index.
bool roomier(const Candidate& a, const Candidate& b);

using Plan = std::vector<std::pair<uint32_t, unsigned>>;  // (node, tasks)

// As few nodes as possible: every required node (`must`) a task and as many more as it
// holds, then the roomiest of `others`, the last one the tightest that holds what is left.
std::optional<Plan> pack_plan(const Request& r, const std::vector<Candidate>& must, std::vector<Candidate> others);

// `plan` holds (node, ntasks) pairs in any order; the shares come out by ascending node.
Allocation build(const Request& r, const std::vector<NodeState>& nodes,
                 std::vector<std::pair<uint32_t, unsigned>> plan);

// Block distribution of r.ntasks over `chosen` (exactly r.nnodes nodes): the lowest-indexed
// ntasks % nnodes nodes get one task more. Nullopt if a node cannot take its tasks.
std::optional<Allocation> build_spread(const Request& r, const std::vector<NodeState>& nodes,
                                       std::vector<uint32_t> chosen);

// Slurm's one-dimensional best fit over groups (base blocks, runs of free nodes): which of
// `amount` (per group, in order) to use to reach `want`. The smallest single group that
// suffices; else the fewest groups, the largest first, and for the last one the smallest
// that covers what is left (ties: the lower position). Returns (position, how much of it)
// pairs, or nullopt if all of them together are too few.
std::optional<std::vector<std::pair<size_t, uint64_t>>> choose_groups(const std::vector<uint64_t>& amount,
                                                                      uint64_t want);

}  // namespace corral::topology
