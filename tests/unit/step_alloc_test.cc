#include "node/steps/step_alloc.h"

#include <gtest/gtest.h>

namespace corral::node {
namespace {

IdSet ids(std::string_view text) {
  auto s = IdSet::parse(text);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? *s : IdSet{};
}

// Job 12: n1..n4 with 8 cores each (and `gpus` GPUs each).
StepAllocator job12(int gpus = 0) {
  std::vector<JobNode> nodes;
  for (int i = 1; i <= 4; ++i)
    nodes.push_back({"n" + std::to_string(i), IdSet::range(0, 7), gpus > 0 ? IdSet::range(0, gpus - 1) : IdSet{}});
  auto a = StepAllocator::create(12, std::move(nodes));
  EXPECT_TRUE(a.ok()) << a.message();
  return std::move(*a);
}

StepRequest tasks(uint32_t n, uint32_t cpt = 1) {
  StepRequest r;
  r.ntasks = n;
  r.cores_per_task = cpt;
  return r;
}

StepRequest on_nodes(uint32_t nnodes, uint32_t n) {
  StepRequest r = tasks(n);
  r.nnodes = nnodes;
  return r;
}

StepRequest on(std::string nodelist, uint32_t n) {
  StepRequest r = tasks(n);
  r.nodelist = std::move(nodelist);
  return r;
}

NodeShare ns(std::string name, uint32_t ntasks, std::string_view cores, std::string_view gpus = "") {
  return NodeShare{std::move(name), ntasks, ids(cores), gpus.empty() ? IdSet{} : ids(gpus)};
}

using Layout = std::vector<NodeShare>;

Layout layout(StepAllocator& a, StepId id, const StepRequest& r) {
  auto s = a.allocate(id, r);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? s->nodes : Layout{};
}

Error fail(StepAllocator& a, StepId id, const StepRequest& r) {
  auto s = a.allocate(id, r);
  EXPECT_FALSE(s.ok());
  return s.ok() ? Error{} : s.error();
}

TEST(StepAlloc, CreateRejectsBadJobs) {
  EXPECT_EQ(StepAllocator::create(3, {}).message(), "job 3 has no nodes to run steps on");
  auto dup = StepAllocator::create(3, {{"a", ids("0"), {}}, {"a", ids("0"), {}}});
  EXPECT_EQ(dup.message(), "job 3 lists node a twice");
  auto nocores = StepAllocator::create(3, {{"a", {}, {}}});
  EXPECT_EQ(nocores.message(), "node a of job 3 has no cores");
  EXPECT_EQ(StepAllocator::create(3, {{"", ids("0"), {}}}).message(), "job 3: node 0 has no name");
}

TEST(StepAlloc, FewestNodesBlockLayout) {
  auto a = job12();
  EXPECT_EQ(layout(a, 0, tasks(10)), (Layout{ns("n1", 8, "0-7"), ns("n2", 2, "0-1")}));
  auto b = job12();
  // 3 cores per task: 2 tasks fit on an 8-core node, so 5 tasks need 3 nodes.
  EXPECT_EQ(layout(b, 0, tasks(5, 3)), (Layout{ns("n1", 2, "0-5"), ns("n2", 2, "0-5"), ns("n3", 1, "0-2")}));
  auto c = job12();
  auto one = c.allocate(0, tasks(1));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ntasks(), 1u);
  EXPECT_EQ(one->nodes, (Layout{ns("n1", 1, "0")}));
}

TEST(StepAlloc, ExactNodeCountSpreadsEvenly) {
  auto a = job12();
  // 7 tasks on 3 nodes: 3+2+2, the extra task on the first node.
  EXPECT_EQ(layout(a, 0, on_nodes(3, 7)), (Layout{ns("n1", 3, "0-2"), ns("n2", 2, "0-1"), ns("n3", 2, "0-1")}));
  auto b = job12();
  EXPECT_EQ(layout(b, 0, on_nodes(4, 4)),
            (Layout{ns("n1", 1, "0"), ns("n2", 1, "0"), ns("n3", 1, "0"), ns("n4", 1, "0")}));
}

TEST(StepAlloc, ExactNodeCountSkipsNodesTooBusy) {
  auto a = job12();
  layout(a, 0, tasks(7));  // n1 cores 0-6 busy, one core left
  // 2 tasks per node: n1 cannot hold 2, so n2 and n3.
  EXPECT_EQ(layout(a, 1, on_nodes(2, 4)), (Layout{ns("n2", 2, "0-1"), ns("n3", 2, "0-1")}));
  // 3 tasks on 2 nodes: n1 (1 free core) takes the base task, n2 the extra one.
  EXPECT_EQ(layout(a, 2, on_nodes(2, 3)), (Layout{ns("n1", 1, "7"), ns("n2", 2, "2-3")}));
}

TEST(StepAlloc, StepsOwnTheirCores) {
  auto a = job12();
  EXPECT_EQ(layout(a, 0, tasks(6)), (Layout{ns("n1", 6, "0-5")}));
  EXPECT_EQ(layout(a, 1, tasks(4)), (Layout{ns("n1", 2, "6-7"), ns("n2", 2, "0-1")}));
  a.release(0);
  EXPECT_EQ(layout(a, 2, tasks(3)), (Layout{ns("n1", 3, "0-2")}));
  EXPECT_EQ(a.running(), 2u);
  a.release(99);  // unknown: ignored
  EXPECT_EQ(a.running(), 2u);
}

TEST(StepAlloc, FullJobMeansWaitNotNever) {
  auto a = job12();
  layout(a, 0, tasks(32));
  Error e = fail(a, 1, tasks(1));
  EXPECT_EQ(e.code, Errc::unavailable);
  EXPECT_EQ(e.message,
            "the step asks for 1 task of 1 core each; not enough of job 12's cores or GPUs are "
            "free now");
  EXPECT_EQ(fail(a, 1, on_nodes(4, 4)).code, Errc::unavailable);
  a.release(0);
  EXPECT_EQ(layout(a, 1, tasks(1)), (Layout{ns("n1", 1, "0")}));
}

TEST(StepAlloc, DuplicateStepIdsAreRefused) {
  auto a = job12();
  layout(a, 5, tasks(1));
  EXPECT_EQ(fail(a, 5, tasks(1)).code, Errc::already_exists);
  EXPECT_EQ(a.enqueue(5, tasks(1)).error().code, Errc::already_exists);
}

TEST(StepAlloc, OverlapUsesBusyCoresButNotMoreThanTheNode) {
  auto a = job12();
  layout(a, 0, tasks(6));  // n1 0-5
  StepRequest ov = tasks(4);
  ov.overlap = true;
  // Free cores first (6-7), then busy ones from the lowest.
  EXPECT_EQ(layout(a, 1, ov), (Layout{ns("n1", 4, "0-1,6-7")}));
  // The overlap step holds nothing exclusively: 6-7 are still free for a normal step.
  EXPECT_EQ(layout(a, 2, tasks(2)), (Layout{ns("n1", 2, "6-7")}));
  // Nine tasks do not fit one node even with overlap.
  StepRequest nine = tasks(9);
  nine.overlap = true;
  EXPECT_EQ(layout(a, 3, nine), (Layout{ns("n1", 8, "0-7"), ns("n2", 1, "0")}));
  nine.nnodes = 1;
  EXPECT_EQ(fail(a, 4, nine).code, Errc::invalid_argument);
  // Releasing an overlap step frees nothing others hold: n1 stays full.
  a.release(1);
  EXPECT_EQ(fail(a, 5, on("n1", 1)).code, Errc::unavailable);
}

TEST(StepAlloc, OverlapRunsInAFullJob) {
  auto a = job12();
  layout(a, 0, tasks(32));
  StepRequest ov = tasks(2);
  ov.overlap = true;
  EXPECT_EQ(layout(a, 1, ov), (Layout{ns("n1", 2, "0-1")}));
}

TEST(StepAlloc, NodelistNodesAreUsed) {
  auto a = job12();
  EXPECT_EQ(layout(a, 0, on("n3", 2)), (Layout{ns("n3", 2, "0-1")}));
  auto b = job12();
  // Both named nodes get a task, then block fill in job order.
  EXPECT_EQ(layout(b, 0, on("n[2,4]", 10)), (Layout{ns("n2", 8, "0-7"), ns("n4", 2, "0-1")}));
  auto c = job12();
  // n3 alone is too small for 10 tasks: the first other node joins.
  EXPECT_EQ(layout(c, 0, on("n3", 10)), (Layout{ns("n1", 8, "0-7"), ns("n3", 2, "0-1")}));
  auto d = job12();
  StepRequest r = on("n4", 4);
  r.nnodes = 2;
  EXPECT_EQ(layout(d, 0, r), (Layout{ns("n1", 2, "0-1"), ns("n4", 2, "0-1")}));
}

TEST(StepAlloc, BusyNamedNodeMeansWait) {
  auto a = job12();
  layout(a, 0, on("n3", 8));
  Error e = fail(a, 1, on("n3", 1));
  EXPECT_EQ(e.code, Errc::unavailable);
  EXPECT_EQ(layout(a, 1, on("n4", 1)), (Layout{ns("n4", 1, "0")}));
}

TEST(StepAlloc, NeverFitsSaysWhatTheJobHas) {
  auto a = job12();
  Error e = fail(a, 0, on_nodes(9, 9));
  EXPECT_EQ(e.code, Errc::invalid_argument);
  EXPECT_EQ(e.message, "the step asks for 9 nodes; job 12 has 4");
  EXPECT_EQ(fail(a, 0, tasks(33)).message,
            "the step asks for 33 tasks of 1 core each; job 12 has 4 nodes (n[1-4]) with 8 "
            "cores each");
  EXPECT_EQ(fail(a, 0, tasks(1, 9)).message,
            "the step asks for 1 task of 9 cores each; job 12 has 4 nodes (n[1-4]) with 8 cores "
            "each");
  EXPECT_EQ(fail(a, 0, on_nodes(2, 17)).message,
            "the step asks for 17 tasks of 1 core each on 2 nodes; job 12 has 4 nodes (n[1-4]) "
            "with 8 cores each");
  EXPECT_EQ(fail(a, 0, on_nodes(3, 2)).message,
            "the step asks for 2 tasks on 3 nodes; every node needs at least one task");
  EXPECT_EQ(fail(a, 0, tasks(0)).message, "the step asks for 0 tasks; it needs at least one");
  EXPECT_EQ(fail(a, 0, tasks(1, 0)).code, Errc::invalid_argument);
  StepRequest g = tasks(1);
  g.gpus_per_task = 1;
  EXPECT_EQ(fail(a, 0, g).message,
            "the step asks for 1 task of 1 core and 1 GPU each; job 12 has 4 nodes (n[1-4]) "
            "with 8 cores each");
  // Even with every core busy, an impossible step is reported as impossible.
  layout(a, 1, tasks(32));
  EXPECT_EQ(fail(a, 0, tasks(33)).code, Errc::invalid_argument);
}

TEST(StepAlloc, NeverFitsNodelistErrors) {
  auto a = job12();
  EXPECT_EQ(fail(a, 0, on("n9", 1)).message, "the step asks for node n9, which is not in job 12 (n[1-4])");
  Error bad = fail(a, 0, on("n[1-", 1));
  EXPECT_EQ(bad.code, Errc::invalid_argument);
  EXPECT_EQ(bad.message.rfind("the step's node list (-w) is not valid: ", 0), 0u) << bad.message;
  StepRequest r = on("n[1-3]", 3);
  r.nnodes = 2;
  EXPECT_EQ(fail(a, 0, r).message, "the step names 3 nodes with -w but asks for 2 nodes with -N");
  EXPECT_EQ(fail(a, 0, on("n[1-3]", 2)).message,
            "the step names 3 nodes with -w but asks for 2 tasks; every node needs at least one "
            "task");
  EXPECT_TRUE(a.allocate(0, on("n3", 9)).ok());  // n3 plus another node
}

TEST(StepAlloc, GpusPerTaskLimitTasksPerNode) {
  auto made = StepAllocator::create(5, {{"a1", ids("0-3"), ids("0-1")}, {"a2", ids("0-3"), ids("0-3")}});
  ASSERT_TRUE(made.ok());
  StepAllocator a = std::move(*made);
  StepRequest r = tasks(3);
  r.gpus_per_task = 1;
  EXPECT_EQ(layout(a, 0, r), (Layout{ns("a1", 2, "0-1", "0-1"), ns("a2", 1, "0", "0")}));
  // a1's GPUs are taken: the next GPU step goes to a2 although a1 has free cores.
  r.ntasks = 1;
  EXPECT_EQ(layout(a, 1, r), (Layout{ns("a2", 1, "1", "1")}));
  EXPECT_EQ(layout(a, 2, tasks(1)), (Layout{ns("a1", 1, "2")}));
  StepRequest big = tasks(1);
  big.gpus_per_task = 5;
  Error e = fail(a, 3, big);
  EXPECT_EQ(e.code, Errc::invalid_argument);
  EXPECT_EQ(e.message,
            "the step asks for 1 task of 1 core and 5 GPUs each; job 5 has 2 nodes (a[1-2]) "
            "with 4 cores each and 2 to 4 GPUs");
}

TEST(StepAlloc, UsesTheNodesOwnCoreIds) {
  auto made = StepAllocator::create(8, {{"x", ids("0-1,4-5"), {}}});
  ASSERT_TRUE(made.ok());
  StepAllocator a = std::move(*made);
  EXPECT_EQ(layout(a, 0, tasks(3)), (Layout{ns("x", 3, "0-1,4")}));
  EXPECT_EQ(layout(a, 1, tasks(1)), (Layout{ns("x", 1, "5")}));
}

TEST(StepAllocQueue, StrictFifoAfterReleases) {
  auto made = StepAllocator::create(7, {{"solo", IdSet::range(0, 7), {}}});
  ASSERT_TRUE(made.ok());
  StepAllocator a = std::move(*made);
  layout(a, 1, tasks(6));
  ASSERT_EQ(fail(a, 2, tasks(4)).code, Errc::unavailable);
  ASSERT_TRUE(a.enqueue(2, tasks(4)).ok());
  // Step 3 would fit in the 2 free cores, but step 2 waits before it.
  Error e = fail(a, 3, tasks(1));
  EXPECT_EQ(e.code, Errc::unavailable);
  EXPECT_EQ(e.message, "the step waits behind 1 step queued earlier in job 7");
  ASSERT_TRUE(a.enqueue(3, tasks(1)).ok());
  EXPECT_TRUE(a.ready().empty());  // no overtaking
  EXPECT_EQ(a.queued(), 2u);

  a.release(1);
  auto r = a.ready();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, 2u);
  EXPECT_EQ(r[0].share.nodes, (Layout{ns("solo", 4, "0-3")}));
  EXPECT_EQ(r[1].id, 3u);
  EXPECT_EQ(r[1].share.nodes, (Layout{ns("solo", 1, "4")}));
  EXPECT_EQ(a.queued(), 0u);
  EXPECT_EQ(a.running(), 2u);

  ASSERT_TRUE(a.enqueue(4, tasks(4)).ok());
  ASSERT_TRUE(a.enqueue(5, tasks(3)).ok());
  a.release(3);  // 4 free cores: step 4 fits, step 5 then does not
  r = a.ready();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 4u);
  EXPECT_EQ(r[0].share.nodes, (Layout{ns("solo", 4, "4-7")}));
  a.release(2);
  r = a.ready();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 5u);
  EXPECT_EQ(r[0].share.nodes, (Layout{ns("solo", 3, "0-2")}));
}

TEST(StepAllocQueue, ReleaseDropsAWaitingStep) {
  auto made = StepAllocator::create(7, {{"solo", IdSet::range(0, 3), {}}});
  ASSERT_TRUE(made.ok());
  StepAllocator a = std::move(*made);
  layout(a, 1, tasks(4));
  ASSERT_TRUE(a.enqueue(2, tasks(4)).ok());
  ASSERT_TRUE(a.enqueue(3, tasks(2)).ok());
  a.release(2);  // cancelled while waiting
  EXPECT_EQ(a.queued(), 1u);
  a.release(1);
  auto r = a.ready();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 3u);
}

TEST(StepAllocQueue, EnqueueRefusesStepsThatNeverFit) {
  auto a = job12();
  Status s = a.enqueue(1, on_nodes(9, 9));
  EXPECT_EQ(s.error().code, Errc::invalid_argument);
  EXPECT_EQ(s.message(), "the step asks for 9 nodes; job 12 has 4");
  EXPECT_EQ(a.queued(), 0u);
}

TEST(StepAllocQueue, OverlapStepsDoNotWaitBehindTheQueue) {
  auto a = job12();
  layout(a, 0, tasks(32));
  ASSERT_TRUE(a.enqueue(1, tasks(1)).ok());
  StepRequest ov = tasks(1);
  ov.overlap = true;
  EXPECT_EQ(layout(a, 2, ov), (Layout{ns("n1", 1, "0")}));
  // But a never-fitting step is still invalid, not queued behind the others.
  EXPECT_EQ(fail(a, 3, tasks(40)).code, Errc::invalid_argument);
}

}  // namespace
}  // namespace corral::node
