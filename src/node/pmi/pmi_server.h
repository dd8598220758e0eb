// A PMI server for the local ranks of one step on one node: each task talks to it over
// its own socketpair (PMI_FD), driven without blocking by the agent's EventLoop, in PMI-1's
// wire protocol or, when its init asks for version 2, PMI-2's (pmi_wire.h). Puts are
// shared with the step's other nodes at every barrier (PMI-2: kvs-fence) through a
// PmiExchange; PMI-2's node attributes stay on this node.
//
// Usage (on the loop thread):
//   auto server = PmiServer::create(loop, exchange, step, {0, 1}, callbacks);
//   auto end = (*server)->take_task_end(0);   // give end->fd and end->env to task 0
//   ... after every task was started, close the task ends in the agent (UniqueFd does).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "node/pmi/pmi_exchange.h"
#include "node/pmi/pmi_wire.h"
#include "util/event_loop.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

struct PmiStep {
  std::string kvsname;  // unique per step, e.g. "corral_42_0"; no spaces
  int size = 0;         // ranks in the whole step
  int appnum = 0;
  int universe_size = 0;        // 0: same as size
  std::string process_mapping;  // PMI_process_mapping; empty: not published (MPICH then
                                // exchanges hostnames through put/get to find its nodes)
};

struct PmiAbort {
  int rank = -1;
  int exit_code = 1;
  std::string message;  // may be empty: MPICH 4.0 sends only the exit code
};

struct PmiCallbacks {
  // A task called PMI_Abort/MPI_Abort: the step should be killed. MPICH's client waits
  // for an answer that never comes, so the server closes that task's connection, which
  // makes it exit; the other ranks keep waiting until the launcher kills them.
  std::function<void(const PmiAbort&)> on_abort;
  // A task broke the protocol (its connection is closed), closed its connection between
  // init and finalize, or the exchange failed (rank -1; every connection is closed).
  // Ranks of the step will then wait forever: the launcher should kill the step.
  std::function<void(int rank, const std::string& message)> on_error;
};
// Both callbacks are posted to the loop, so they may destroy the server.

// The task's end of its PMI connection. The fd is close-on-exec: the launcher must keep it
// open across exec (dup2 it in the child, or clear FD_CLOEXEC there) under the number
// PMI_FD names; pmi_task_env() builds the environment for another number. The launcher
// should also drop inherited PMI_* / PMIX_* variables (PMI_PORT would take precedence).
struct PmiTaskEnd {
  UniqueFd fd;
  std::vector<std::string> env;  // KEY=VALUE, for fd's own number
};

std::vector<std::string> pmi_task_env(int rank, int size, int fd_in_task);

// PMI_process_mapping for the step's layout, in the form MPICH parses:
// "(vector,(first_node,node_count,ranks_per_node),...)". `node_of_rank[r]` is the node
// index (0-based, in step order) of rank r. Runs of ranks on the same node make blocks;
// a layout made of repeats of one pattern (cyclic) is written once, as MPICH repeats it.
// Returns "" when the mapping would not fit in a PMI value (pmi::kValueMax).
std::string pmi_process_mapping(const std::vector<int>& node_of_rank);
// Block layout: node i holds tasks_per_node[i] consecutive ranks.
std::string pmi_block_process_mapping(const std::vector<int>& tasks_per_node);

class PmiServer {
 public:
  // `local_ranks`: the step's ranks on this node. A barrier completes once all of them
  // entered it, so each must be started with its task end.
  static Result<std::unique_ptr<PmiServer>> create(EventLoop& loop, PmiExchange& exchange, PmiStep step,
                                                   const std::vector<int>& local_ranks, PmiCallbacks callbacks);
  ~PmiServer();
  PmiServer(const PmiServer&) = delete;
  PmiServer& operator=(const PmiServer&) = delete;

  // Once per local rank; not_found for a rank that is not local or was already taken.
  Result<PmiTaskEnd> take_task_end(int rank);

  // Every local rank sent finalize (or aborted / went away).
  bool all_done() const;
  std::size_t barriers_completed() const { return barriers_completed_; }

 private:
  struct Conn;
  PmiServer(EventLoop& loop, PmiExchange& exchange, PmiStep step, PmiCallbacks callbacks);
  Status add_rank(int rank);
  void on_events(Conn& c, uint32_t events);
  void read_input(Conn& c);
  // Handles the whole messages in c.in (lines, or PMI-2 messages once init asked for it).
  void consume(Conn& c);
  void handle_line(Conn& c, std::string_view line);
  void handle_v2(Conn& c, std::string_view message);
  void handle_v2_nodeattr(Conn& c, const pmi::Command& cmd, const std::string& thrid);
  // A PMI-2 answer, carrying the request's thrid back when it had one.
  void reply_v2(Conn& c, std::string_view name, std::vector<std::pair<std::string, std::string>> args,
                const std::string& thrid);
  void handle_barrier_in(Conn& c);
  void handle_put(Conn& c, const pmi::Command& cmd);
  // Checks a put (PMI-1 put, PMI-2 kvs-put or node attribute) against the announced limits
  // and the rank's budget, and charges the budget: "" when it may be stored, else why not.
  std::string charge_put(Conn& c, const std::string* key, const std::string* value);
  void store_put(const std::string& key, const std::string& value);
  void handle_get(Conn& c, const pmi::Command& cmd);
  void handle_abort(Conn& c, const pmi::Command& cmd);
  void start_fence();
  void finish_fence(Result<PmiKvs> all_puts);
  void reply(Conn& c, std::string line);
  void flush(Conn& c);
  void watch(Conn& c, bool want_write);
  void close_conn(Conn& c);
  void fail(Conn& c, const std::string& message);
  void report_error(int rank, std::string message);

  EventLoop& loop_;
  PmiExchange& exchange_;
  PmiStep step_;
  PmiCallbacks callbacks_;
  std::vector<std::unique_ptr<Conn>> conns_;  // never erased: callbacks may hold a Conn&
  PmiKvs kvs_;                                // every put seen so far, local and remote
  PmiKvs pending_puts_;                       // local puts since the last barrier
  PmiKvs node_attrs_;                         // PMI-2 info-putnodeattr: this node's ranks only
  struct ParkedGet {                          // info-getnodeattr wait=TRUE, until the put
    Conn* conn;
    std::string key, thrid;
  };
  std::vector<ParkedGet> parked_;
  std::size_t in_barrier_ = 0;
  bool fence_running_ = false;
  std::size_t barriers_completed_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // posted work checks it
};

}  // namespace corral::node
