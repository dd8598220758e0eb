// The controller's pool of VNIs (pure bookkeeping, no I/O). A job's VNIs are handed out
// round-robin so a number is reused as late as possible; at CLEANUP they are not freed
// but quarantined until every node of the job has confirmed its CXI services are gone
// (or an admin cleaned / resumed the node), so a VNI is never shared by two live services.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/idset.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

class VniPool {
 public:
  // `idset` is RFC 22 ("1024-65535"). Errors: empty, ids above 65535, or 1 / 10 (the
  // default CXI service's VNIs) in the set.
  static Result<VniPool> create(std::string_view idset);

  // `count` VNIs for `jobid`, continuing after the last VNI handed out (wrapping) and
  // skipping busy ones. The error says how many were asked and how many are free.
  Result<std::vector<uint16_t>> reserve(uint64_t jobid, unsigned count);
  // Replay after a restart: the job holds `vnis` again. A VNI outside the pool is kept
  // out of it anyway; a VNI already reserved or quarantined is an error (the caller
  // decides how loudly to complain). `when` is the reservation's time: the round-robin
  // cursor resumes after the most recent one restored.
  Status restore(uint64_t jobid, const std::vector<uint16_t>& vnis, double when = 0);
  // Replay of a saved quarantine: `vnis` wait for `nodes` to confirm (none: nothing kept).
  Status restore_quarantine(uint64_t jobid, const std::vector<uint16_t>& vnis, const std::set<std::string>& nodes,
                            double when = 0);

  // The job's reservation ends: its VNIs wait for `nodes` to confirm (none: free now).
  // Returns the VNIs released (empty when the job held none).
  std::vector<uint16_t> release(uint64_t jobid, const std::vector<std::string>& nodes);
  // `node` has no services of the job any more. Returns true when that freed its VNIs.
  bool confirm(uint64_t jobid, const std::string& node);
  // `node` was cleaned or resumed: every quarantine pending on it is confirmed there.
  // Returns the jobs whose quarantine changed.
  std::vector<uint64_t> confirm_node(const std::string& node);

  struct Reservation {
    uint64_t jobid = 0;
    std::vector<uint16_t> vnis;
  };
  struct Quarantine {
    uint64_t jobid = 0;
    std::vector<uint16_t> vnis;
    std::set<std::string> nodes;  // still to confirm
  };

  const IdSet& pool() const { return pool_; }
  size_t size() const { return pool_.count(); }
  size_t free_count() const;
  size_t reserved_count() const;
  size_t quarantined_count() const;
  IdSet free_set() const;
  std::vector<Reservation> reservations() const;  // by job id
  std::vector<Quarantine> quarantines() const;    // by job id
  const std::vector<uint16_t>* reservation(uint64_t jobid) const;
  const Quarantine* quarantine(uint64_t jobid) const;

 private:
  explicit VniPool(IdSet pool) : pool_(std::move(pool)) {}
  bool busy(uint32_t vni) const { return owner_.count(static_cast<uint16_t>(vni)) > 0; }
  std::vector<uint16_t> take_free(unsigned count);
  Status claim(uint64_t jobid, const std::vector<uint16_t>& vnis, double when);

  IdSet pool_;
  uint32_t cursor_ = 0;        // the next VNI to consider (round-robin)
  double restored_when_ = -1;  // time of the latest restored reservation
  std::map<uint64_t, std::vector<uint16_t>> reserved_;
  std::map<uint64_t, Quarantine> quarantined_;
  std::map<uint16_t, uint64_t> owner_;  // every reserved or quarantined VNI -> its job
};

}  // namespace corral::fabric::slingshot
