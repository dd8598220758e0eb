#include "cli/job_format.h"

#include <sys/wait.h>

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/job_row.h"
#include "util/units.h"

namespace corral::cli {

namespace pb = corral::v1;

namespace {

std::string or_none(const std::string& s, const char* none = "(null)") { return s.empty() ? none : s; }

std::string time_limit(double seconds) { return seconds > 0 ? format_elapsed(seconds) : "UNLIMITED"; }

// Embedded JSON documents are shown as objects; text that isn't JSON stays a string.
nlohmann::json embedded(const std::string& text) {
  if (text.empty()) return nullptr;
  auto doc = nlohmann::json::parse(text, nullptr, false);
  return doc.is_discarded() ? nlohmann::json(text) : doc;
}

}  // namespace

int shell_exit_code(int waitstatus) {
  if (waitstatus < 0) return 1;
  if (WIFEXITED(waitstatus)) return WEXITSTATUS(waitstatus);
  if (WIFSIGNALED(waitstatus)) return 128 + WTERMSIG(waitstatus);
  return 1;
}

std::string exit_code_pair(int waitstatus) {
  if (waitstatus < 0) return "0:0";
  if (WIFSIGNALED(waitstatus)) return fmt::format("0:{}", WTERMSIG(waitstatus));
  return fmt::format("{}:0", WEXITSTATUS(waitstatus));
}

int job_exit_code(const pb::JobInfo& job) {
  const bool ran = job.waitstatus() >= 0;
  const int code = ran ? shell_exit_code(job.waitstatus()) : 1;
  if (!job.exception_type().empty()) return code != 0 ? code : 1;
  if (!ran) return job.result() == "COMPLETED" ? 0 : 1;
  return code;
}

std::string format_timestamp(double epoch) {
  if (epoch <= 0) return "";
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string show_job_text(const pb::JobInfo& j, double now) {
  std::string deps;
  for (const auto& d : j.dependencies()) deps += (deps.empty() ? "" : ",") + d;
  std::string exception =
      j.exception_type().empty() ? "(null)" : fmt::format("{}: {}", j.exception_type(), j.exception_note());
  std::string out;
  out += fmt::format("JobId={} JobName={}\n", j.id(), j.name());
  out += fmt::format("   UserId={}({}) Partition={}\n", or_none(j.username(), "?"), j.userid(), or_none(j.partition()));
  out +=
      fmt::format("   JobState={} Result={} Reason={}\n", j.state(), or_none(j.result()), or_none(j.reason(), "None"));
  out += fmt::format("   Urgency={} Priority={} Dependency={}\n", j.urgency(), j.priority(), or_none(deps));
  out +=
      fmt::format("   SubmitTime={} StartTime={} EndTime={}\n", or_none(format_timestamp(j.t_submit()), "Unknown"),
                  or_none(format_timestamp(j.t_run()), "Unknown"), or_none(format_timestamp(j.t_cleanup()), "Unknown"));
  std::string deps_buffer;
  const double ran = run_time(row_of(j, deps_buffer), now);
  out += fmt::format("   RunTime={} TimeLimit={}\n", format_elapsed(ran), time_limit(j.duration()));
  out +=
      fmt::format("   NumNodes={} NumTasks={} NumCPUs={} NumGPUs={}\n", j.nnodes(), j.ntasks(), j.ncores(), j.ngpus());
  out += fmt::format("   NodeList={}\n", or_none(j.nodelist()));
  if (!j.stepmgr().empty()) out += fmt::format("   StepManager={}\n", j.stepmgr());
  out +=
      fmt::format("   ExitCode={} Exception={} Restarts={}\n", exit_code_pair(j.waitstatus()), exception, j.requeues());
  out += fmt::format("   WorkDir={}\n", or_none(j.cwd()));
  for (const auto& [k, v] : std::map<std::string, std::string>(j.hook_info().begin(), j.hook_info().end()))
    out += fmt::format("   {}={}\n", k, v);
  return out;
}

nlohmann::json job_to_json(const pb::JobInfo& j) {
  // One definition of a job's JSON keys (append_job_json), shared with `corral queue --json`.
  std::string deps, text;
  append_job_json(text, row_of(j, deps), 0);
  nlohmann::json o = nlohmann::json::parse(text);
  if (!j.stepmgr().empty()) o["stepmgr"] = j.stepmgr();
  if (j.cpu_seconds() > 0) o["cpu_seconds"] = j.cpu_seconds();
  if (j.requeues() > 0) o["requeues"] = j.requeues();
  for (const auto& [k, v] : j.hook_info()) o["hooks"][k] = v;
  if (!j.jobspec().empty()) o["jobspec"] = embedded(j.jobspec());
  if (!j.r().empty()) o["R"] = embedded(j.r());
  if (j.eventlog_size() > 0) {
    auto& log = o["eventlog"] = nlohmann::json::array();
    for (const auto& line : j.eventlog()) log.push_back(embedded(line));
  }
  return o;
}

nlohmann::json node_to_json(const pb::NodeInfo& n) {
  nlohmann::json o = {
      {"name", n.name()},
      {"state", n.state()},
      {"reason", n.reason()},
      {"reason_time", n.reason_time()},
      {"reason_userid", n.reason_userid()},
      {"cores", n.cores()},
      {"cores_used", n.cores_used()},
      {"gpus", n.gpus()},
      {"gpus_used", n.gpus_used()},
      {"memory_mb", n.memory_mb()},
      {"memory_used_mb", n.memory_used_mb()},
      {"partitions", nlohmann::json::array()},
      {"jobs", nlohmann::json::array()},
      {"agent", n.agent()},
      {"housekeeping", n.housekeeping()},
      {"hardware", nlohmann::json::object()},
  };
  for (const auto& [hook, what] : n.hardware()) o["hardware"][hook] = what;  // std::map order: stable output
  for (const auto& p : n.partitions()) o["partitions"].push_back(p);
  for (auto id : n.jobs()) o["jobs"].push_back(id);
  return o;
}

}  // namespace corral::cli
