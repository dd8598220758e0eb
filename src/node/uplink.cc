#include "node/uplink.h"

#include <algorithm>

namespace corral::node {

void Uplink::grew(size_t bytes) {
  dirty_ = true;
  bytes_ += bytes;
  if (bytes_ >= kMaxBatchBytes) flush();
}

void Uplink::started(uint64_t jobid, const std::string& node) {
  if (state_ == State::closed) return;
  auto* s = batch_.add_started();
  s->set_jobid(jobid);
  s->set_node(node);
  grew(16 + node.size());
}

void Uplink::exited(const v1::JobNodeExit& exit) {
  if (state_ == State::closed) return;
  // A job's output must reach the controller before its exit; fields of one message
  // carry no order among themselves, so pending output goes out first, on its own.
  if (batch_.output_size() > 0) flush();
  *batch_.add_exited() = exit;
  grew(32 + exit.node().size() + exit.error().size() + 8 * static_cast<size_t>(exit.tasks_size()));
}

void Uplink::perilog(v1::PerilogResult result) {
  if (state_ == State::closed) return;
  size_t size = 32 + result.output().size();
  *batch_.add_perilog() = std::move(result);
  grew(size);
}

void Uplink::step(const v1::StepInfo& info) {
  if (state_ == State::closed) return;
  *batch_.add_steps() = info;
  lingering_ = true;
  bytes_ += 96 + info.name().size() + info.nodelist().size() + info.command().size();
  if (bytes_ >= kMaxBatchBytes) flush(true);
}

void Uplink::output(uint64_t jobid, uint32_t rank, const std::string& node, bool is_stderr, std::string_view data,
                    bool eof) {
  if (state_ == State::closed) return;
  auto key = std::make_tuple(jobid, rank, is_stderr);
  while (!data.empty() || eof) {
    v1::TaskOutput* out = nullptr;
    auto it = open_output_.find(key);
    if (it != open_output_.end() && batch_.output(it->second).data().size() < kMaxOutputChunk) {
      out = batch_.mutable_output(it->second);
    } else {
      out = batch_.add_output();
      out->set_jobid(jobid);
      out->set_rank(rank);
      out->set_stderr(is_stderr);
      out->set_node(node);
      open_output_[key] = batch_.output_size() - 1;
    }
    size_t room = kMaxOutputChunk - out->data().size();
    size_t n = std::min(room, data.size());
    out->mutable_data()->append(data.data(), n);
    data.remove_prefix(n);
    if (data.empty() && eof) {
      out->set_eof(true);
      open_output_.erase(key);
      eof = false;
    }
    grew(n + 24);  // may flush, which resets open_output_
  }
}

void Uplink::flush(bool lingering) {
  if (!dirty_ && !(lingering && lingering_)) return;
  v1::AgentMessage msg;
  msg.Swap(&batch_);
  dirty_ = false;
  lingering_ = false;
  bytes_ = 0;
  open_output_.clear();
  number_output(msg);
  switch (state_) {
    case State::online:
      keep_unacked(msg);
      sink_(session_, std::move(msg));
      break;
    case State::registering:
      held_.push_back(std::move(msg));
      break;
    case State::offline:
      keep_perilogs(msg);
      spool_output(msg);
      break;
    case State::closed:
      break;
  }
}

void Uplink::number_output(v1::AgentMessage& msg) {
  for (auto& o : *msg.mutable_output()) o.set_seq(++seq_);
}

void Uplink::keep_unacked(const v1::AgentMessage& msg) {
  if (spool_ == nullptr) return;
  for (const auto& o : msg.output()) {
    unacked_bytes_ += o.data().size();
    unacked_.push_back(o);
  }
  while (unacked_bytes_ > kMaxUnackedBytes && !unacked_.empty()) {
    unacked_bytes_ -= unacked_.front().data().size();
    unacked_.pop_front();
  }
}

void Uplink::spool_output(v1::AgentMessage& msg) {
  if (spool_ == nullptr) return;
  for (const auto& o : msg.output()) spool_->keep(o, incarnation_);
}

void Uplink::acked(uint64_t seq) {
  while (!unacked_.empty() && unacked_.front().seq() <= seq) {
    unacked_bytes_ -= unacked_.front().data().size();
    unacked_.pop_front();
  }
}

void Uplink::add_spooled(v1::AgentMessage& reg) {
  if (spool_ == nullptr) return;
  for (auto& o : spool_->read()) *reg.add_output() = std::move(o);
}

void Uplink::keep_perilogs(v1::AgentMessage& msg) {
  for (auto& r : *msg.mutable_perilog()) unsent_perilogs_.push_back(std::move(r));
}

// The session is over: whatever it did not send yet would be dropped by the link.
void Uplink::go_offline() {
  // What corrald may not have received goes first, in order, then what was not sent.
  if (spool_ != nullptr)
    for (const auto& o : unacked_) spool_->keep(o, incarnation_);
  unacked_.clear();
  unacked_bytes_ = 0;
  state_ = State::offline;
  flush(true);
  for (auto& m : held_) {
    keep_perilogs(m);
    spool_output(m);
  }
  held_.clear();
}

void Uplink::set_registering(uint64_t session) {
  if (state_ == State::closed) return;
  go_offline();  // what was produced before the register snapshot belongs to the old session
  session_ = session;
  state_ = State::registering;
}

void Uplink::set_online(uint64_t session) {
  if (state_ != State::registering || session != session_) return;
  // corrald has the register, and with it what the spool held (nothing is spooled while
  // registering).
  if (spool_ != nullptr) spool_->clear();
  flush();
  state_ = State::online;
  // Perilogs that finished while disconnected go first, then what came after register.
  std::vector<v1::PerilogResult> unsent;
  unsent.swap(unsent_perilogs_);
  for (auto& r : unsent) perilog(std::move(r));
  flush();
  for (auto& m : held_) {
    keep_unacked(m);
    sink_(session_, std::move(m));
  }
  held_.clear();
}

void Uplink::set_offline(uint64_t session) {
  if (state_ == State::closed || session != session_) return;
  go_offline();
}

void Uplink::close() {
  state_ = State::closed;
  batch_.Clear();
  dirty_ = false;
  held_.clear();
  unsent_perilogs_.clear();
}

}  // namespace corral::node
