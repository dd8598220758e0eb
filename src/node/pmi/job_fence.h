// PMI barriers of a job's own tasks across nodes (`corral run -N4 ./mpi_prog` outside an
// allocation, where no step tree exists): each node's PMI server hands its puts to a
// JobFenceExchange, which calls JobFence on the job's step manager; the step manager's
// JobFenceTable answers every node once all of them contributed to that barrier.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/credentials.h"
#include "node/pmi/pmi_exchange.h"
#include "steps.pb.h"
#include "util/result.h"

namespace corral {
class EventLoop;
}  // namespace corral

namespace corral::node {

// Thread-safe: used by the StepService's handler threads.
class JobFenceTable {
 public:
  JobFenceTable();
  ~JobFenceTable();
  JobFenceTable(const JobFenceTable&) = delete;
  JobFenceTable& operator=(const JobFenceTable&) = delete;

  // Blocks until every one of req.nodes nodes contributed to barrier (jobid, seq), then
  // returns everyone's puts. Fails when the job is dropped, when `cancelled()` turns
  // true (polled a few times a second), or when the request contradicts the others.
  Result<PmiKvs> contribute(const v1::JobFenceRequest& req, const std::function<bool()>& cancelled);
  // The job ended: its waiting callers fail with a message saying so.
  void drop_job(uint64_t jobid);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The node side: one per job and node. fence() runs the call on its own thread and posts
// the answer to the loop; destroying the exchange cancels calls still waiting.
class JobFenceExchange final : public PmiExchange {
 public:
  // `creds`: for a step manager over TCP, whose requests carry a credential (null: a step
  // manager on a Unix socket only).
  JobFenceExchange(EventLoop& loop, std::string stepmgr_uri, uint64_t jobid, std::string node, uint32_t nodes,
                   std::shared_ptr<net::Credentials> creds = nullptr, const std::string& tls_ca = {});
  ~JobFenceExchange() override;
  JobFenceExchange(const JobFenceExchange&) = delete;
  JobFenceExchange& operator=(const JobFenceExchange&) = delete;

  void fence(PmiKvs local_puts, Done done) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
