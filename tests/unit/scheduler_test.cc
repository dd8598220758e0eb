#include "sched/scheduler.h"

#include <chrono>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace corral::sched {
namespace {

Request job_request(uint64_t id, unsigned ntasks, unsigned cores_per_task = 1) {
  Request r;
  r.jobid = id;
  r.ntasks = ntasks;
  r.cores_per_task = cores_per_task;
  return r;
}

PendingJob pending(const Request& r, double duration = 0, unsigned urgency = 16) {
  return PendingJob{r, urgency, r.jobid, duration};
}

PendingJob pending(uint64_t id, unsigned ntasks, double duration = 0, unsigned urgency = 16) {
  return pending(job_request(id, ntasks), duration, urgency);
}

std::unique_ptr<Scheduler> cluster(unsigned nodes, unsigned cores, unsigned gpus = 0, uint64_t mem = 0) {
  auto s = std::make_unique<Scheduler>(topology::make_flat_placer());
  for (unsigned i = 0; i < nodes; ++i) s->add_node({"n" + std::to_string(i), cores, gpus, mem});
  return s;
}

std::vector<uint64_t> ids(const std::vector<Decision>& ds) {
  std::vector<uint64_t> out;
  for (const auto& d : ds) out.push_back(d.jobid);
  return out;
}

// Runs a job that holds `ncores` cores of `node` until `end` (0 = unknown).
void occupy(Scheduler& s, uint64_t id, uint32_t node, unsigned ncores, double end) {
  topology::NodeShare share;
  share.node = node;
  share.ntasks = 1;
  IdSet take;  // the lowest `ncores` free cores
  for (uint32_t c : s.node_state(node).free_cores.to_vector()) {
    if (take.count() == ncores) break;
    take.insert(c);
  }
  share.cores = take;
  s.allocate(id, topology::Allocation{{share}, false}, end);
}

TEST(Scheduler, NodesAreNamedAndIndexed) {
  auto s = cluster(3, 4);
  EXPECT_EQ(s->node_count(), 3u);
  EXPECT_EQ(s->node_index("n2"), 2u);
  EXPECT_FALSE(s->node_index("n9"));
  EXPECT_EQ(s->node_config(1).cores, 4u);
  EXPECT_EQ(s->node_state(1).free_cores.encode(), "0-3");
  EXPECT_TRUE(s->node_state(1).usable);
}

TEST(Scheduler, StartsInPriorityOrder) {
  auto s = cluster(1, 4);
  s->enqueue(pending(job_request(3, 4), 0, 16));
  s->enqueue(pending(job_request(1, 4), 0, 16));
  s->enqueue(pending(job_request(2, 4), 0, 20));
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{2});
  EXPECT_EQ(s->reason(1), "Resources");
  EXPECT_EQ(s->reason(3), "Resources");
  s->release(2);
  EXPECT_EQ(ids(s->schedule(1)), std::vector<uint64_t>{1});
  s->release(1);
  EXPECT_EQ(ids(s->schedule(2)), std::vector<uint64_t>{3});
  EXPECT_EQ(s->pending_count(), 0u);
  EXPECT_EQ(s->reason(3), "");
}

TEST(Scheduler, UrgencyZeroHoldsAndThirtyOneExpedites) {
  auto s = cluster(1, 4);
  s->enqueue(pending(1, 4, 0, 0));
  s->enqueue(pending(2, 4, 0, 16));
  s->enqueue(pending(3, 4, 0, 31));
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{3});
  EXPECT_EQ(s->reason(1), "JobHeldUser");
  s->release(3);
  EXPECT_EQ(ids(s->schedule(1)), std::vector<uint64_t>{2});
  s->release(2);
  EXPECT_TRUE(s->schedule(2).empty());  // still held, on an idle machine
  EXPECT_EQ(s->reason(1), "JobHeldUser");
  s->set_urgency(1, 16);
  EXPECT_EQ(ids(s->schedule(3)), std::vector<uint64_t>{1});
}

TEST(Scheduler, SetUrgencyReorders) {
  auto s = cluster(1, 4);
  s->enqueue(pending(1, 4));
  s->enqueue(pending(2, 4));
  s->set_urgency(2, 31);
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{2});
}

TEST(Scheduler, DequeueRemoves) {
  auto s = cluster(1, 4);
  s->enqueue(pending(1, 8));
  s->enqueue(pending(2, 2));
  s->dequeue(1);
  s->dequeue(42);  // unknown: no-op
  EXPECT_EQ(s->pending_count(), 1u);
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{2});
}

TEST(Scheduler, JobsShareNodesByCore) {
  auto s = cluster(2, 4);
  for (uint64_t id = 1; id <= 8; ++id) s->enqueue(pending(id, 1));
  auto started = s->schedule(0);
  ASSERT_EQ(started.size(), 8u);
  // Tight packing: the first node fills before the second is touched.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(started[i].alloc.shares[0].node, 0u);
  EXPECT_EQ(started[0].alloc.shares[0].cores.encode(), "0");
  EXPECT_EQ(started[3].alloc.shares[0].cores.encode(), "3");
  EXPECT_EQ(s->node_state(0).jobs, 4u);
  EXPECT_TRUE(s->node_state(1).free_cores.empty());
}

TEST(Scheduler, ExclusiveJobsGetWholeNodesAlone) {
  auto s = cluster(2, 4, 0, 1000);
  s->enqueue(pending(1, 1));
  Request ex = job_request(2, 1);
  ex.exclusive = true;
  ex.nnodes = 2;
  ex.ntasks = 2;
  s->enqueue(pending(ex));
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{1});
  EXPECT_EQ(s->reason(2), "Resources");
  s->release(1);
  auto started = s->schedule(1);
  ASSERT_EQ(ids(started), std::vector<uint64_t>{2});
  EXPECT_EQ(started[0].alloc.shares[0].cores.encode(), "0-3");
  EXPECT_EQ(started[0].alloc.shares[0].memory_mb, 1000u);
  EXPECT_TRUE(s->node_state(0).exclusive_held);
  // 3 cores of each node are used by no task, but no one else may have them.
  s->enqueue(pending(3, 1));
  EXPECT_TRUE(s->schedule(2).empty());
  s->release(2);
  EXPECT_FALSE(s->node_state(0).exclusive_held);
  EXPECT_EQ(ids(s->schedule(3)), std::vector<uint64_t>{3});
}

TEST(Scheduler, GpusAndMemoryAreCounted) {
  auto s = cluster(2, 8, 2, 4000);
  Request gpu = job_request(1, 2);
  gpu.gpus_per_task = 1;
  s->enqueue(pending(gpu));
  gpu.jobid = 2;
  s->enqueue(pending(gpu));
  gpu.jobid = 3;
  s->enqueue(pending(gpu));
  Request mem = job_request(4, 1);
  mem.mem_per_node_mb = 3000;
  s->enqueue(pending(mem));
  mem.jobid = 5;
  s->enqueue(pending(mem));
  mem.jobid = 6;
  s->enqueue(pending(mem));
  auto started = s->schedule(0);
  EXPECT_EQ(ids(started), (std::vector<uint64_t>{1, 2, 4, 5}));
  EXPECT_EQ(s->reason(3), "Resources");
  EXPECT_EQ(s->reason(6), "Resources");
  EXPECT_EQ(s->node_state(0).free_gpus.count() + s->node_state(1).free_gpus.count(), 0u);
  EXPECT_EQ(s->node_state(0).free_memory_mb + s->node_state(1).free_memory_mb, 2000u);
}

TEST(Scheduler, RequiredNodeDownWaitsWithoutBlocking) {
  auto s = cluster(2, 4);
  s->set_usable(1, false);
  Request w = job_request(1, 1);
  w.required_nodes = {1};
  s->enqueue(pending(w, 0, 31));
  s->enqueue(pending(2, 4, 0));  // unknown duration, would touch any reservation
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{2});
  EXPECT_EQ(s->reason(1), "ReqNodeNotAvail");
  s->set_usable(1, true);
  EXPECT_EQ(ids(s->schedule(1)), std::vector<uint64_t>{1});
}

TEST(Scheduler, AllowedNodesRestrict) {
  auto s = cluster(3, 4);
  Request r = job_request(1, 2);
  r.allowed_nodes = {2};
  s->enqueue(pending(r));
  auto started = s->schedule(0);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].alloc.shares[0].node, 2u);
}

TEST(Scheduler, BlockedTopJobThatCanNeverFitDoesNotBlock) {
  auto s = cluster(2, 4);
  occupy(*s, 100, 0, 2, 50);
  s->set_usable(1, false);
  s->enqueue(pending(1, 8, 10, 31));  // needs both nodes; node 1 is down for good
  s->enqueue(pending(2, 2, 0));       // unknown duration
  EXPECT_EQ(ids(s->schedule(0)), std::vector<uint64_t>{2});
  EXPECT_EQ(s->reason(1), "Resources");
}

// Three 4-core nodes. Node 0 is full until t=100, node 1 half full until t=100, node 2 has
// one core taken by a job without a time limit. The top job wants two whole nodes: it is
// reserved nodes 0 and 1 from t=100.
class Backfill : public ::testing::Test {
 protected:
  void SetUp() override {
    s = cluster(3, 4);
    occupy(*s, 100, 0, 4, 100);
    occupy(*s, 101, 1, 2, 100);
    occupy(*s, 102, 2, 1, 0);
    Request big = job_request(1, 2, 4);
    big.nnodes = 2;
    s->enqueue(pending(big, 1000, 20));
  }
  std::unique_ptr<Scheduler> s;
};

TEST_F(Backfill, ShortJobUsesReservedNodesBeforeTheReservation) {
  s->enqueue(pending(2, 2, 50));  // best fit is node 1 (2 free); done by t=50
  auto started = s->schedule(0);
  ASSERT_EQ(ids(started), std::vector<uint64_t>{2});
  EXPECT_EQ(started[0].alloc.shares[0].node, 1u);
  EXPECT_EQ(s->reason(1), "Resources");
}

TEST_F(Backfill, LongJobMayNotDelayTheReservation) {
  s->enqueue(pending(2, 2, 500));  // fits on node 1 or 2; 2 is outside the reservation
  s->enqueue(pending(3, 2, 500));  // fits only on node 1 now: would delay the top job
  auto started = s->schedule(0);
  ASSERT_EQ(ids(started), std::vector<uint64_t>{2});
  EXPECT_EQ(started[0].alloc.shares[0].node, 2u);
  EXPECT_EQ(s->reason(3), "Priority");
  EXPECT_EQ(s->reason(1), "Resources");
}

TEST_F(Backfill, UnknownDurationOnlyOutsideReservedNodes) {
  s->enqueue(pending(2, 2, 0));  // best fit is node 1, reserved: goes to node 2
  s->enqueue(pending(3, 2, 0));  // only node 1 has room for it left
  auto started = s->schedule(0);
  ASSERT_EQ(ids(started), std::vector<uint64_t>{2});
  EXPECT_EQ(started[0].alloc.shares[0].node, 2u);
  EXPECT_EQ(s->reason(3), "Priority");
}

TEST_F(Backfill, ReservedJobStartsWhenItsNodesFree) {
  s->enqueue(pending(2, 2, 50));
  s->enqueue(pending(3, 1, 500));
  ASSERT_EQ(ids(s->schedule(0)), (std::vector<uint64_t>{2, 3}));  // 3 lands on node 2
  s->release(2);
  s->release(100);
  s->release(101);
  auto started = s->schedule(100);
  ASSERT_EQ(ids(started), std::vector<uint64_t>{1});
  ASSERT_EQ(started[0].alloc.shares.size(), 2u);
  EXPECT_EQ(started[0].alloc.shares[0].node, 0u);
  EXPECT_EQ(started[0].alloc.shares[1].node, 1u);
}

TEST_F(Backfill, ShortJobThatWouldOutlastTheReservationWaits) {
  s->enqueue(pending(2, 3, 150));  // node 2 has 3 free: outside, so it may start
  s->enqueue(pending(3, 2, 150));  // only node 1 left, and 150 > 100
  s->enqueue(pending(4, 2, 99));   // node 1, ends by t=99: fine
  EXPECT_EQ(ids(s->schedule(0)), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(s->reason(3), "Priority");
}

TEST(Scheduler, ReleaseNodeReturnsOneNodeAtATime) {
  auto s = cluster(2, 4);
  Request r = job_request(1, 8);
  r.nnodes = 2;
  s->enqueue(pending(r, 0));
  ASSERT_EQ(s->schedule(0).size(), 1u);
  EXPECT_TRUE(s->is_allocated(1));
  s->release_node(1, 0);
  EXPECT_EQ(s->node_state(0).free_cores.encode(), "0-3");
  EXPECT_EQ(s->node_state(0).jobs, 0u);
  EXPECT_TRUE(s->node_state(1).free_cores.empty());
  EXPECT_TRUE(s->is_allocated(1));
  s->release_node(1, 0);  // twice: no-op
  s->release_node(1, 1);
  EXPECT_FALSE(s->is_allocated(1));
  EXPECT_EQ(s->node_state(1).free_cores.encode(), "0-3");
}

TEST(Scheduler, AllocateRestoresRunningJobs) {
  auto s = cluster(1, 4);
  s->enqueue(pending(7, 2));
  occupy(*s, 7, 0, 2, 0);  // restoring job 7 takes it off the queue
  EXPECT_EQ(s->pending_count(), 0u);
  EXPECT_EQ(s->node_state(0).free_cores.encode(), "2-3");
  occupy(*s, 8, 0, 4, 0);  // overlaps: only what is free is taken
  EXPECT_TRUE(s->node_state(0).free_cores.empty());
  s->release(8);
  EXPECT_EQ(s->node_state(0).free_cores.encode(), "2-3");
}

TEST(Scheduler, UnsatisfiableRequestsSayWhy) {
  auto s = std::make_unique<Scheduler>(topology::make_flat_placer());
  for (int i = 0; i < 16; ++i) s->add_node({"n" + std::to_string(i), 64, 4, 256000});
  s->add_node({"n99", 8, 0, 1000});

  Request r = job_request(1, 20);
  r.nnodes = 20;
  r.allowed_nodes.clear();
  for (uint32_t n = 0; n < 16; ++n) r.allowed_nodes.push_back(n);
  EXPECT_EQ(s->unsatisfiable(r), "requested 20 nodes but the partition has 16 nodes (up or down)");

  r = job_request(1, 1, 128);
  EXPECT_EQ(s->unsatisfiable(r), "requested 128 cores per task but the largest node has 64");

  r = job_request(1, 1);
  r.required_nodes = {16};
  r.allowed_nodes = {0, 1};
  EXPECT_EQ(s->unsatisfiable(r), "requested node n99 is not in the allowed set");

  r = job_request(1, 1);
  r.gpus_per_task = 8;
  EXPECT_EQ(s->unsatisfiable(r), "requested 8 GPUs per task but the largest node has 4");

  r = job_request(1, 1);
  r.mem_per_node_mb = 300000;
  EXPECT_EQ(s->unsatisfiable(r), "requested 300000 MB of memory per node but the largest node has 256000 MB");

  r = job_request(1, 1);
  r.gpus_per_task = 1;
  r.required_nodes = {16};
  EXPECT_NE(s->unsatisfiable(r)->find("requested node n99 cannot hold one task"), std::string::npos);

  r = job_request(1, 2000);
  EXPECT_NE(s->unsatisfiable(r)->find("holds at most 1032 at once"), std::string::npos);

  r = job_request(1, 2);
  r.nnodes = 4;
  EXPECT_NE(s->unsatisfiable(r)->find("every node needs at least one task"), std::string::npos);

  // Satisfiable, even though nothing is free now.
  s->set_usable(0, false);
  r = job_request(1, 1024);
  r.nnodes = 16;
  EXPECT_FALSE(s->unsatisfiable(r));
}

// Random submissions, completions and node outages; the pool must never hand out a core,
// GPU or byte twice, and what it reports free must be exactly what no job holds.
TEST(Scheduler, RandomizedNeverOverAllocates) {
  std::mt19937 rng(12345);
  auto s = std::make_unique<Scheduler>(topology::make_flat_placer());
  const unsigned nnodes = 12;
  for (unsigned i = 0; i < nnodes; ++i) {
    s->add_node({"n" + std::to_string(i), 4 + 4 * (i % 3), i % 4 == 0 ? 2u : 0u, 8000});
  }
  std::map<uint64_t, std::pair<Allocation, double>> running;  // id -> (alloc, end)
  uint64_t next_id = 1;
  for (int step = 0; step < 400; ++step) {
    double now = step;
    for (int k = rng() % 4; k > 0; --k) {
      Request r = job_request(next_id, 1 + rng() % 6, 1 + rng() % 3);
      if (rng() % 5 == 0) r.gpus_per_task = 1;
      if (rng() % 4 == 0) r.mem_per_node_mb = 1000 * (1 + rng() % 4);
      if (rng() % 8 == 0) r.exclusive = true;
      if (rng() % 4 == 0) r.nnodes = 1 + rng() % 3;
      if (r.nnodes > r.ntasks) r.nnodes = r.ntasks;
      if (rng() % 10 == 0) r.required_nodes = {static_cast<uint32_t>(rng() % nnodes)};
      if (s->unsatisfiable(r)) continue;
      double duration = rng() % 3 == 0 ? 0 : 1 + rng() % 30;
      s->enqueue(pending(r, duration, rng() % 20 == 0 ? 31 : 16));
      ++next_id;
    }
    if (rng() % 10 == 0) s->set_usable(rng() % nnodes, rng() % 3 != 0);
    for (auto it = running.begin(); it != running.end();) {
      double end = it->second.second;
      bool done = end > 0 ? end <= now : rng() % 40 == 0;
      if (done && rng() % 2 == 0 && it->second.first.shares.size() > 1) {
        // Housekeeping returns the nodes one by one.
        for (const auto& share : it->second.first.shares) s->release_node(it->first, share.node);
      } else if (done) {
        s->release(it->first);
      }
      if (done) {
        EXPECT_FALSE(s->is_allocated(it->first));
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& d : s->schedule(now)) {
      EXPECT_TRUE(d.alloc.shares.size() > 0);
      EXPECT_FALSE(running.contains(d.jobid));
      double end = 0;
      running[d.jobid] = {d.alloc, end};
    }
    // Time limits are not tracked by the test; jobs with a limit end at a random time.
    for (auto& [id, job] : running) {
      if (job.second == 0 && rng() % 2 == 0) job.second = now + 1 + rng() % 20;
    }

    std::vector<IdSet> cores(nnodes), gpus(nnodes);
    std::vector<uint64_t> mem(nnodes, 0);
    std::vector<unsigned> jobs(nnodes, 0);
    std::vector<bool> exclusive(nnodes, false);
    for (const auto& [id, job] : running) {
      for (const auto& share : job.first.shares) {
        ASSERT_LT(share.node, nnodes);
        EXPECT_TRUE(cores[share.node].intersect(share.cores).empty()) << "core given twice";
        EXPECT_TRUE(gpus[share.node].intersect(share.gpus).empty()) << "GPU given twice";
        EXPECT_GE(share.cores.count(), share.ntasks);
        cores[share.node] = cores[share.node].union_with(share.cores);
        gpus[share.node] = gpus[share.node].union_with(share.gpus);
        mem[share.node] += share.memory_mb;
        ++jobs[share.node];
        if (job.first.exclusive) exclusive[share.node] = true;
      }
    }
    for (uint32_t n = 0; n < nnodes; ++n) {
      const auto& st = s->node_state(n);
      EXPECT_LE(mem[n], st.memory_mb);
      EXPECT_EQ(st.free_cores.union_with(cores[n]), IdSet::range(0, st.cores - 1));
      EXPECT_TRUE(st.free_cores.intersect(cores[n]).empty());
      EXPECT_EQ(st.free_memory_mb + mem[n], st.memory_mb);
      EXPECT_EQ(st.jobs, jobs[n]);
      if (exclusive[n]) {
        EXPECT_EQ(jobs[n], 1u) << "exclusive node " << n << " shared";
      }
    }
    if (HasFailure()) break;
  }
}

TEST(Scheduler, LongFullQueueIsCheap) {
  auto s = cluster(16, 64);
  for (uint64_t id = 1; id <= 16 * 64; ++id) s->enqueue(pending(id, 1, 100));
  ASSERT_EQ(s->schedule(0).size(), 16u * 64u);
  std::mt19937 rng(1);
  for (uint64_t id = 2000; id < 12000; ++id) {
    s->enqueue(pending(job_request(id, 1 + rng() % 4, 1 + rng() % 2), rng() % 100));
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(s->schedule(1).empty());
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(std::chrono::duration<double>(elapsed).count(), 0.05);
  EXPECT_EQ(s->reason(11999), "Resources");
}

TEST(Scheduler, ManySingleCoreJobsPlaceQuickly) {
  auto s = cluster(16, 64);
  for (uint64_t id = 1; id <= 10000; ++id) s->enqueue(pending(id, 1, 10));
  auto t0 = std::chrono::steady_clock::now();
  size_t started = 0;
  for (int pass = 0; started < 10000 && pass < 100; ++pass) {
    auto ds = s->schedule(pass);
    started += ds.size();
    for (const auto& d : ds) s->release(d.jobid);  // done at once: keeps the machine churning
  }
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(started, 10000u);
  EXPECT_LT(elapsed, 2.0);  // > 5,000 jobs/s even in a debug build
}

}  // namespace
}  // namespace corral::sched
