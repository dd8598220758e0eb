// A controller's pool of 16-bit ids that jobs hold on nodes (Slingshot VNIs, Infiniband
// partition keys): pure bookkeeping, no I/O. A job's ids are handed out round-robin so a
// number is reused as late as possible; at CLEANUP they are not freed but quarantined
// until every node of the job has confirmed it stopped using them (or an admin cleaned /
// resumed the node), so an id is never shared by two live jobs.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/idset.h"
#include "util/result.h"

namespace corral {

class QuarantinePool {
 public:
  // `idset` is RFC 22 ("1024-65535"); `what` names it in errors ("vni-pool") and `unit`
  // names one id in messages ("VNI"). Errors: empty, or ids above `max_id` (at most 65535).
  static Result<QuarantinePool> create(std::string_view idset, std::string_view what, std::string unit,
                                       uint32_t max_id = 65535);

  // `count` ids for `jobid`, continuing after the last id handed out (wrapping) and
  // skipping busy ones. The error says how many were asked and how many are free.
  Result<std::vector<uint16_t>> reserve(uint64_t jobid, unsigned count);
  // Replay after a restart: the job holds `ids` again. An id outside the pool is kept
  // out of it anyway; an id already reserved or quarantined is an error (the caller
  // decides how loudly to complain). `when` is the reservation's time: the round-robin
  // cursor resumes after the most recent one restored.
  Status restore(uint64_t jobid, const std::vector<uint16_t>& ids, double when = 0);
  // Replay of a saved quarantine: `ids` wait for `nodes` to confirm (none: nothing kept).
  Status restore_quarantine(uint64_t jobid, const std::vector<uint16_t>& ids, const std::set<std::string>& nodes,
                            double when = 0);

  // The job's reservation ends: its ids wait for `nodes` to confirm (none: free now).
  // Returns the ids released (empty when the job held none).
  std::vector<uint16_t> release(uint64_t jobid, const std::vector<std::string>& nodes);
  // `node` has no services of the job any more. Returns true when that freed its ids.
  bool confirm(uint64_t jobid, const std::string& node);
  // `node` was cleaned or resumed: every quarantine pending on it is confirmed there.
  // Returns the jobs whose quarantine changed.
  std::vector<uint64_t> confirm_node(const std::string& node);

  struct Reservation {
    uint64_t jobid = 0;
    std::vector<uint16_t> ids;
  };
  struct Quarantine {
    uint64_t jobid = 0;
    std::vector<uint16_t> ids;
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
  QuarantinePool(IdSet pool, std::string unit) : pool_(std::move(pool)), unit_(std::move(unit)) {}
  bool busy(uint32_t id) const { return owner_.count(static_cast<uint16_t>(id)) > 0; }
  std::vector<uint16_t> take_free(unsigned count);
  Status claim(uint64_t jobid, const std::vector<uint16_t>& ids, double when);

  IdSet pool_;
  std::string unit_;
  uint32_t cursor_ = 0;        // the next id to consider (round-robin)
  double restored_when_ = -1;  // time of the latest restored reservation
  std::map<uint64_t, std::vector<uint16_t>> reserved_;
  std::map<uint64_t, Quarantine> quarantined_;
  std::map<uint16_t, uint64_t> owner_;  // every reserved or quarantined id -> its job
};

}  // namespace corral
