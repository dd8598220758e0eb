#include "node/perilog_runner.h"

#include <signal.h>

#include <spdlog/spdlog.h>

namespace corral::node {

namespace {

// Protobuf string fields must be UTF-8; a script may print anything and the tail may
// start in the middle of a character. Invalid bytes become '?'.
std::string valid_utf8(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    auto c = static_cast<unsigned char>(in[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

}  // namespace

PerilogRunner::PerilogRunner(EventLoop& loop, TaskSupervisor& tasks, Uplink& out, const AgentConfig& config)
    : loop_(loop), tasks_(tasks), out_(out), config_(config) {}

PerilogRunner::~PerilogRunner() {
  for (auto& [id, run] : runs_) {
    tasks_.forget(run.pid);
    if (run.term_timer) loop_.cancel_timer(*run.term_timer);
    if (run.kill_timer) loop_.cancel_timer(*run.kill_timer);
  }
}

void PerilogRunner::run(const v1::RunPerilog& msg) {
  if (msg.nodes().empty()) {
    for (const auto& n : config_.nodes) start_one(msg, n.name);
    return;
  }
  for (const auto& node : msg.nodes()) {
    if (config_.hosts(node))
      start_one(msg, node);
    else
      spdlog::warn("{} for job {}: node {} is not hosted by this agent; ignored", msg.kind(), msg.jobid(), node);
  }
}

void PerilogRunner::start_one(const v1::RunPerilog& msg, const std::string& node) {
  SpawnRequest req;
  // A shell runs the command so sites may give arguments or a pipeline.
  req.argv = {"/bin/sh", "-c", msg.command()};
  bool has_path = false;
  for (const auto& [k, v] : msg.env()) {
    req.env.push_back(k + "=" + v);
    has_path |= k == "PATH";
  }
  if (!has_path) req.env.emplace_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  req.env.push_back("CORRAL_JOBID=" + std::to_string(msg.jobid()));
  req.env.push_back("CORRAL_NODENAME=" + node);
  req.env.push_back("CORRAL_PERILOG=" + msg.kind());
  config_.hooks->perilog_env(req.env);
  req.cwd = "/";
  req.merge_stderr = true;

  const uint64_t id = next_run_++;
  TaskSupervisor::Handlers h;
  h.output = [this, id](bool, std::string_view data, bool) {
    if (auto it = runs_.find(id); it != runs_.end()) append_tail(it->second, data);
  };
  h.exited = [this, id](const TaskSupervisor::Exit& e) { exited(id, e.waitstatus); };
  auto proc = tasks_.spawn(req, std::move(h));
  if (!proc) {
    Run failed;
    failed.jobid = msg.jobid();
    failed.kind = msg.kind();
    failed.node = node;
    failed.tail = proc.message();
    report(failed, spawn_failure_code(proc.error()) << 8);
    return;
  }
  const pid_t pid = *proc;
  Run& run = runs_[id];
  run.jobid = msg.jobid();
  run.kind = msg.kind();
  run.node = node;
  run.pid = pid;
  if (msg.timeout() > 0) run.term_timer = loop_.add_timer(msg.timeout(), [this, id] { on_timeout(id); });
  spdlog::debug("{} for job {} started on {} (pid {})", run.kind, run.jobid, node, pid);
}

void PerilogRunner::on_timeout(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& run = it->second;
  run.term_timer.reset();
  run.timed_out = true;
  spdlog::warn("{} for job {} on {} timed out", run.kind, run.jobid, run.node);
  tasks_.signal(run.pid, SIGTERM);
  run.kill_timer = loop_.add_timer(config_.kill_grace, [this, id] {
    auto i = runs_.find(id);
    if (i == runs_.end()) return;
    i->second.kill_timer.reset();
    tasks_.signal(i->second.pid, SIGKILL);
  });
}

void PerilogRunner::append_tail(Run& run, std::string_view data) {
  if (data.size() >= kOutputTail) {
    run.tail.assign(data.substr(data.size() - kOutputTail));
    return;
  }
  run.tail.append(data);
  if (run.tail.size() > kOutputTail) run.tail.erase(0, run.tail.size() - kOutputTail);
}

void PerilogRunner::exited(uint64_t id, int waitstatus) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& run = it->second;
  if (run.term_timer) loop_.cancel_timer(*run.term_timer);
  if (run.kill_timer) loop_.cancel_timer(*run.kill_timer);
  report(run, waitstatus);
  runs_.erase(it);
}

void PerilogRunner::report(Run& run, int waitstatus) {
  v1::PerilogResult r;
  r.set_jobid(run.jobid);
  r.set_node(run.node);
  r.set_kind(run.kind);
  r.set_waitstatus(waitstatus);
  r.set_timed_out(run.timed_out);
  r.set_output(valid_utf8(run.tail));
  out_.perilog(std::move(r));
}

void PerilogRunner::kill_all(int sig) {
  for (auto& [id, run] : runs_) tasks_.signal(run.pid, sig);
}

void PerilogRunner::fill_register(v1::Register& reg) const {
  for (const auto& [id, run] : runs_) {
    auto* r = reg.add_perilogs();
    r->set_jobid(run.jobid);
    r->set_kind(run.kind);
    r->set_node(run.node);
  }
}

}  // namespace corral::node
