// MPI port ranges (like Slurm's MpiParams=ports=): the controller owns a configured
// range and hands each job's step manager a contiguous share of it; the step manager
// gives each step a contiguous block from its share, published in the step's
// environment. Some MPIs need the same ports on all of a step's nodes, which is why the
// ports are scheduled centrally rather than picked per node. Pure bookkeeping, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace corral::job {

// An inclusive range of TCP ports, all in 1024-65535.
struct PortRange {
  uint16_t first = 0;
  uint16_t last = 0;

  // "12000-12999" or a single port "12000"; errors name the bad text.
  static Result<PortRange> parse(std::string_view text);
  uint32_t size() const { return uint32_t{last} - first + 1; }
  bool contains(const PortRange& o) const { return first <= o.first && o.last <= last; }
  std::string encode() const;  // "12000-12999"; "12000" for a single port
  bool operator==(const PortRange&) const = default;
};

// The environment entry a step's tasks get: "CORRAL_MPI_PORTS=12000-12009".
inline constexpr std::string_view kMpiPortsVar = "CORRAL_MPI_PORTS";
std::string mpi_ports_env(const PortRange& ports);

// Cray PMI's PMI_CONTROL_PORT from a step's block: its first two ports ("12000,12001"),
// one for the step's one command and one more, as Cray PMI asks; one for a block of one.
std::string pals_control_ports(const PortRange& block);

// Free ports of one range, kept as sorted disjoint spans; allocation is first fit.
class PortFreeList {
 public:
  explicit PortFreeList(PortRange whole) : whole_(whole), free_{whole} {}

  // The lowest `n` contiguous free ports; unavailable when no gap is large enough.
  Result<PortRange> take(uint32_t n);
  // Frees a block; invalid_argument if it is outside the range or (partly) free already.
  Status give_back(PortRange block);

  uint32_t free_count() const;
  const std::vector<PortRange>& free_spans() const { return free_; }
  const PortRange& whole() const { return whole_; }

 private:
  PortRange whole_;
  std::vector<PortRange> free_;
};

// The controller's configured range, split into per-job shares.
class PortPool {
 public:
  explicit PortPool(PortRange configured) : free_(configured) {}
  // A share of `count_per_share` ports for one job's step manager; unavailable when the
  // range is exhausted (the job then runs without MPI ports or waits, as the caller decides).
  Result<PortRange> split(uint32_t count_per_share);
  // Returns a share when its job ends.
  Status release(PortRange share) { return free_.give_back(share); }
  uint32_t free_count() const { return free_.free_count(); }

 private:
  PortFreeList free_;
};

// One step manager's share, handed out to its steps.
class PortShare {
 public:
  explicit PortShare(PortRange share) : free_(share) {}
  // `n` contiguous ports for one step; unavailable while running steps hold the share.
  Result<PortRange> take(uint32_t n);
  Status give_back(PortRange ports) { return free_.give_back(ports); }
  uint32_t free_count() const { return free_.free_count(); }
  const PortRange& range() const { return free_.whole(); }

 private:
  PortFreeList free_;
};

}  // namespace corral::job
