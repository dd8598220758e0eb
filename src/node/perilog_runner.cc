#include "node/perilog_runner.h"

#include <signal.h>
#include <sys/epoll.h>

#include <cerrno>

#include <spdlog/spdlog.h>

#include "node/exec/task_launcher.h"

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

PerilogRunner::PerilogRunner(EventLoop& loop, Uplink& out, const AgentConfig& config)
    : loop_(loop), out_(out), config_(config) {}

PerilogRunner::~PerilogRunner() {
  for (auto& [pid, run] : runs_) {
    if (run.output.valid()) loop_.remove_fd(run.output.get());
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
  LaunchRequest req;
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

  auto proc = launch_process(req);
  if (!proc) {
    Run failed;
    failed.jobid = msg.jobid();
    failed.kind = msg.kind();
    failed.node = node;
    failed.tail = proc.message();
    report(failed, launch_failure_code(proc.error()) << 8);
    return;
  }
  pid_t pid = proc->pid;
  Run& run = runs_[pid];
  run.jobid = msg.jobid();
  run.kind = msg.kind();
  run.node = node;
  run.pid = pid;
  run.output = std::move(proc->stdout_pipe);
  auto st = loop_.add_fd(run.output.get(), EPOLLIN, [this, pid](uint32_t) {
    auto it = runs_.find(pid);
    if (it == runs_.end()) return;
    if (!read_output(it->second)) {
      loop_.remove_fd(it->second.output.get());
      it->second.output.reset();
    }
  });
  if (!st) spdlog::error("{} on {}: cannot watch its output: {}", run.kind, node, st.message());
  if (msg.timeout() > 0) run.term_timer = loop_.add_timer(msg.timeout(), [this, pid] { on_timeout(pid); });
  spdlog::debug("{} for job {} started on {} (pid {})", run.kind, run.jobid, node, pid);
}

void PerilogRunner::on_timeout(pid_t pid) {
  auto it = runs_.find(pid);
  if (it == runs_.end()) return;
  Run& run = it->second;
  run.term_timer.reset();
  run.timed_out = true;
  spdlog::warn("{} for job {} on {} timed out", run.kind, run.jobid, run.node);
  ::killpg(pid, SIGTERM);
  run.kill_timer = loop_.add_timer(config_.kill_grace, [this, pid] {
    auto i = runs_.find(pid);
    if (i == runs_.end()) return;
    i->second.kill_timer.reset();
    ::killpg(pid, SIGKILL);
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

bool PerilogRunner::read_output(Run& run) {
  if (!run.output.valid()) return false;
  char buf[16384];
  ssize_t n = ::read(run.output.get(), buf, sizeof buf);
  if (n > 0) {
    append_tail(run, std::string_view(buf, static_cast<size_t>(n)));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

bool PerilogRunner::on_child_exit(pid_t pid, int waitstatus) {
  auto it = runs_.find(pid);
  if (it == runs_.end()) return false;
  Run& run = it->second;
  ::killpg(pid, SIGKILL);  // leftovers; the pid cannot have been reused yet
  if (run.term_timer) loop_.cancel_timer(*run.term_timer);
  if (run.kill_timer) loop_.cancel_timer(*run.kill_timer);
  for (int i = 0; i < 64 && read_output(run); ++i) {}
  if (run.output.valid()) loop_.remove_fd(run.output.get());
  report(run, waitstatus);
  runs_.erase(it);
  return true;
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
  for (auto& [pid, run] : runs_) ::killpg(pid, sig);
}

void PerilogRunner::fill_register(v1::Register& reg) const {
  for (const auto& [pid, run] : runs_) {
    auto* r = reg.add_perilogs();
    r->set_jobid(run.jobid);
    r->set_kind(run.kind);
    r->set_node(run.node);
  }
}

}  // namespace corral::node
