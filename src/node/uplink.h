// The agent's way up to the controller: batches everything it has to tell the controller during one loop iteration
// into one AgentMessage, and holds or drops it depending on the connection.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "agent.pb.h"
#include "common.pb.h"
#include "node/output_spool.h"

namespace corral::node {

namespace v1 = ::corral::v1;

class Uplink {
 public:
  // Receives each batch with the session it belongs to (see ControllerLink).
  using Sink = std::function<void(uint64_t session, v1::AgentMessage&&)>;
  static constexpr size_t kMaxOutputChunk = 64 * 1024;   // data per TaskOutput
  static constexpr size_t kMaxBatchBytes = 1024 * 1024;  // well below gRPC's 4 MiB limit

  explicit Uplink(Sink sink) : sink_(std::move(sink)) {}
  // Without a spool, output produced while offline is dropped. `incarnation` is the
  // agent process's (the spool outlives it).
  void set_spool(OutputSpool* spool, std::string incarnation) {
    spool_ = spool;
    incarnation_ = std::move(incarnation);
  }

  void started(uint64_t jobid, const std::string& node);
  void exited(const v1::JobNodeExit& exit);
  void perilog(v1::PerilogResult result);
  // A finished step's accounting record. It lingers: it goes with the next batch that has
  // anything else, or with flush(true), so a job running many short steps sends one
  // message of records now and then rather than one per step. Offline it is dropped: the
  // step manager keeps every record until acknowledged and resends it with `register`.
  void step(const v1::StepInfo& info);
  void output(uint64_t jobid, uint32_t rank, const std::string& node, bool is_stderr, std::string_view data, bool eof);

  // Hands the batch to the sink (online), keeps it until set_online (registering) or
  // drops it (offline: exits are kept by the executor and resent with `register`;
  // perilog results, which nothing else keeps, are kept here and sent once online).
  // `lingering` also sends a batch that holds only step records.
  void flush(bool lingering = false);
  bool has_lingering() const { return lingering_; }

  // Output is numbered (TaskOutput.seq) and kept until corrald acknowledges it: what a
  // broken link lost in flight goes to the spool with what comes while offline, and all
  // of it goes with the next register, before that register's exits.
  void acked(uint64_t seq);
  void add_spooled(v1::AgentMessage& reg);
  static constexpr size_t kMaxUnackedBytes = 16u << 20;  // older unacknowledged output is not kept

  void set_registering(uint64_t session);
  void set_online(uint64_t session);
  void set_offline(uint64_t session);
  void close();  // shutting down: nothing more is sent, ever
  bool online() const { return state_ == State::online; }

 private:
  enum class State { offline, registering, online, closed };
  void grew(size_t bytes);
  void go_offline();
  void keep_perilogs(v1::AgentMessage& msg);
  void number_output(v1::AgentMessage& msg);
  void spool_output(v1::AgentMessage& msg);
  void keep_unacked(const v1::AgentMessage& msg);

  Sink sink_;
  State state_ = State::offline;
  uint64_t session_ = 0;
  v1::AgentMessage batch_;
  bool dirty_ = false;
  bool lingering_ = false;  // batch_ holds step records that wait for company
  size_t bytes_ = 0;
  // Open TaskOutput entry of this batch per (job, rank, stderr), to append small reads.
  std::map<std::tuple<uint64_t, uint32_t, bool>, int> open_output_;
  std::vector<v1::AgentMessage> held_;
  OutputSpool* spool_ = nullptr;
  std::string incarnation_;
  uint64_t seq_ = 0;
  std::deque<v1::TaskOutput> unacked_;  // sent, not yet acknowledged, oldest first
  size_t unacked_bytes_ = 0;
  // Finished perilogs no session took: a controller that restarted meanwhile would
  // otherwise never learn that housekeeping failed.
  std::vector<v1::PerilogResult> unsent_perilogs_;
};

}  // namespace corral::node
