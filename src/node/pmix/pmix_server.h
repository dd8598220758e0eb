// PMIx for tasks: OpenPMIx's server library (libpmix, as Slurm's mpi/pmix uses it) inside
// the node agent. The library allows one server per process, so an agent has one
// PmixServer, started by the first step that asks for PMIx (an agent whose steps never
// do pays nothing), and each such step is a namespace of it (PmixNamespace) for as long
// as the step runs on the agent.
//
// A namespace's fences carry each agent's collected data through the step's PmiExchange,
// the same exchange the PMI-1/PMI-2 server uses: the agent's blob goes in as one value
// and the concatenation of every agent's blob comes back to the library.
//
// Threads: the library calls back on its own progress thread; everything the agent sees
// (fences, aborts) is posted to the agent's EventLoop. Every call here is made on the
// loop thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "node/pmi/pmi_exchange.h"
#include "node/pmi/pmi_server.h"
#include "util/event_loop.h"
#include "util/result.h"

namespace corral::node {

// Who runs where in one step (or in a job's own tasks).
struct PmixLayout {
  std::string nspace;                          // unique per step, e.g. "corral.42.3"
  std::vector<std::string> nodes;              // every node of the step, in node order
  std::vector<std::vector<uint32_t>> ranks;    // ranks[i]: the ranks on nodes[i], ascending
  std::vector<std::size_t> local;              // indexes into nodes: this agent's, ascending
  uid_t uid = 0;                               // the tasks' user: a client must be them
  gid_t gid = 0;
  // Virtual nodes (test clusters): every node of the step is on this one machine, whose
  // host name Open MPI puts in its shared-memory segment names, so ranks of different
  // virtual nodes would share segments: the tasks of a step on several of them are told
  // to leave that transport out.
  bool virtual_nodes = false;
};

// Checks a layout before it reaches the library: names, ranks 0..size-1 once each, local
// nodes that exist and hold ranks. The messages say which part is wrong.
Status check_pmix_layout(const PmixLayout& layout);

// A layout whose ranks are given out in blocks, in node order (`tasks[i]` ranks on
// `nodes[i]`), as corral places them; `local_nodes` are this agent's. Errors say what
// disagrees (a local node missing from the list, sizes that differ).
Result<PmixLayout> pmix_block_layout(std::string nspace, const std::vector<std::string>& nodes,
                                     const std::vector<uint32_t>& tasks, const std::vector<std::string>& local_nodes,
                                     uid_t uid, gid_t gid);

// The value under which an agent's fence data travels in the step's exchange: one per
// agent, named after its first local node so that no two agents of a step collide.
std::string pmix_fence_key(const PmixLayout& layout);

class PmixNamespace;

class PmixServer {
 public:
  // `tmpdir`: a directory only the agent writes (PMIx keeps its rendezvous there);
  // `hostname`: the name the library gives this node. Fails when another PmixServer
  // lives in this process, or when the library cannot start (its message is kept).
  static Result<std::unique_ptr<PmixServer>> start(EventLoop& loop, const std::string& tmpdir,
                                                   const std::string& hostname);
  ~PmixServer();
  PmixServer(const PmixServer&) = delete;
  PmixServer& operator=(const PmixServer&) = delete;

  // Registers the step's namespace with the library. Fences of its local ranks go
  // through `exchange`, which must outlive the namespace; aborts and failures are
  // reported through `callbacks` (posted to the loop). The namespace must not outlive
  // the server.
  Result<std::unique_ptr<PmixNamespace>> add(PmixLayout layout, PmiExchange& exchange, PmiCallbacks callbacks);

  std::size_t namespaces() const;  // registered now

  struct Impl;  // the library's callbacks reach it

 private:
  explicit PmixServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // posted work holds it weakly
};

class PmixNamespace {
 public:
  ~PmixNamespace();  // fences still waiting fail; the library forgets the namespace
  PmixNamespace(const PmixNamespace&) = delete;
  PmixNamespace& operator=(const PmixNamespace&) = delete;

  // Registers local rank `rank` as a client (only the layout's user may connect as it)
  // and returns the KEY=VALUE variables its task needs to reach the server.
  Result<std::vector<std::string>> task_env(uint32_t rank);

  // The task of `rank` connected and has not finalized: when it exits now, the other
  // ranks wait for it forever (the launcher ends the step, as for a broken PMI connection).
  bool left_unfinalized(uint32_t rank) const;
  const std::string& name() const;
  std::size_t fences_completed() const;

  struct State;  // shared with the server's callback side

 private:
  friend class PmixServer;
  explicit PmixNamespace(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// Starts the agent's PmixServer on first use and keeps it. `tmpdir` (made 0700 if
// missing; empty: a fresh one under $TMPDIR) holds the library's rendezvous files. A
// failed start is reported each time it is asked for (nothing is retried behind the
// caller's back).
class PmixHost {
 public:
  PmixHost(EventLoop& loop, std::string tmpdir, std::string hostname);
  ~PmixHost();
  PmixHost(const PmixHost&) = delete;
  PmixHost& operator=(const PmixHost&) = delete;

  Result<PmixServer*> server();
  bool started() const { return server_ != nullptr; }

 private:
  Status make_tmpdir();

  EventLoop& loop_;
  std::string tmpdir_, hostname_;
  bool made_tmpdir_ = false;  // a temporary one, removed with the host
  std::unique_ptr<PmixServer> server_;
  std::string failed_;  // why the start failed, once it did
};

}  // namespace corral::node
