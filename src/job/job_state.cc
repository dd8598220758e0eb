#include "job/job_state.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <nlohmann/json.hpp>

namespace corral::job {
namespace {

using json = nlohmann::json;

constexpr uint32_t bit(JobState s) { return static_cast<uint32_t>(s); }
constexpr uint32_t kPending = bit(JobState::DEPEND) | bit(JobState::PRIORITY) | bit(JobState::SCHED);
constexpr uint32_t kBeforeRun = bit(JobState::NEW) | kPending;
constexpr uint32_t kActive = kBeforeRun | bit(JobState::RUN) | bit(JobState::CLEANUP);
constexpr int64_t kMaxUrgency = 31;  // RFC 30
constexpr int kMaxSeverity = 7;      // RFC 21 exception severities 0..7

struct StateInfo {
  JobState state;
  std::string_view name;
  std::string_view abbrev;
};
constexpr std::array<StateInfo, 7> kStates = {{
    {JobState::NEW, "NEW", "N"},
    {JobState::DEPEND, "DEPEND", "D"},
    {JobState::PRIORITY, "PRIORITY", "P"},
    {JobState::SCHED, "SCHED", "S"},
    {JobState::RUN, "RUN", "R"},
    {JobState::CLEANUP, "CLEANUP", "C"},
    {JobState::INACTIVE, "INACTIVE", "I"},
}};

Error event_error(const Event& ev, const std::string& what) { return invalid("event " + ev.name + ": " + what); }

Status require_state(const JobStatus& s, const Event& ev, uint32_t mask) {
  if (bit(s.state) & mask) return {};
  return event_error(ev, "not valid in state " + std::string(state_name(s.state)));
}

void enter(JobStatus& s, JobState state, double t) {
  s.state = state;
  if (state == JobState::CLEANUP) s.t_cleanup = t;
  if (state == JobState::INACTIVE) s.t_inactive = t;
}

// Context accessors: absent keys are nullopt, keys of the wrong type are errors.
Result<std::optional<std::string>> ctx_string(const json& ctx, const Event& ev, const char* key) {
  auto it = ctx.find(key);
  if (it == ctx.end()) return std::optional<std::string>();
  if (!it->is_string()) return event_error(ev, std::string("context.") + key + " must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> ctx_int(const json& ctx, const Event& ev, const char* key) {
  auto it = ctx.find(key);
  if (it == ctx.end()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return event_error(ev, std::string("context.") + key + " must be an integer");
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::string> required_string(const json& ctx, const Event& ev, const char* key) {
  auto v = ctx_string(ctx, ev, key);
  if (!v) return v.error();
  if (!*v) return event_error(ev, std::string("context.") + key + " is missing");
  return **v;
}

Result<int64_t> required_int(const json& ctx, const Event& ev, const char* key) {
  auto v = ctx_int(ctx, ev, key);
  if (!v) return v.error();
  if (!*v) return event_error(ev, std::string("context.") + key + " is missing");
  return **v;
}

Status check_urgency(const Event& ev, int64_t u) {
  if (u < 0 || u > kMaxUrgency) {
    return event_error(ev, "urgency " + std::to_string(u) + " is outside 0-31");
  }
  return {};
}

Status on_submit(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::NEW)); !st) return st;
  if (s.submitted) return event_error(ev, "the job was already submitted");
  auto u = ctx_int(ctx, ev, "urgency");
  if (!u) return u.error();
  if (*u) {
    if (auto st = check_urgency(ev, **u); !st) return st;
    s.urgency = static_cast<unsigned>(**u);
  }
  s.submitted = true;
  s.t_submit = ev.timestamp;
  return {};
}

Status on_validate(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::NEW)); !st) return st;
  enter(s, JobState::DEPEND, ev.timestamp);
  return {};
}

Status on_invalidate(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::NEW)); !st) return st;
  enter(s, JobState::INACTIVE, ev.timestamp);
  return {};
}

Status on_dependency_add(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::NEW) | bit(JobState::DEPEND)); !st) return st;
  auto d = required_string(ctx, ev, "description");
  if (!d) return d.error();
  s.dependencies.insert(*d);
  return {};
}

// Removing a dependency that is not outstanding is harmless (a hook may resolve a
// dependency twice, e.g. when it re-checks after a restart), so it is not an error.
Status on_dependency_remove(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::NEW) | bit(JobState::DEPEND)); !st) return st;
  auto d = required_string(ctx, ev, "description");
  if (!d) return d.error();
  s.dependencies.erase(*d);
  return {};
}

std::string join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

Status on_depend(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::DEPEND)); !st) return st;
  if (!s.dependencies.empty()) {
    return event_error(ev, "dependencies still outstanding: " + join(s.dependencies));
  }
  enter(s, JobState::PRIORITY, ev.timestamp);
  return {};
}

Status on_priority(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::PRIORITY) | bit(JobState::SCHED)); !st) {
    return st;
  }
  auto p = required_int(ctx, ev, "priority");
  if (!p) return p.error();
  s.priority = *p;
  if (s.state == JobState::PRIORITY) enter(s, JobState::SCHED, ev.timestamp);
  return {};
}

Status on_urgency(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, kActive); !st) return st;
  auto u = required_int(ctx, ev, "urgency");
  if (!u) return u.error();
  if (auto st = check_urgency(ev, *u); !st) return st;
  s.urgency = static_cast<unsigned>(*u);
  return {};
}

Status on_alloc(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::SCHED)); !st) return st;
  s.allocated = true;
  s.t_run = ev.timestamp;
  enter(s, JobState::RUN, ev.timestamp);
  return {};
}

// Perilog actions may be started by hooks before resources are allocated (SCHED) or
// after (RUN); they finish even when a fatal exception has moved the job to CLEANUP.
Status on_prolog_start(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::SCHED) | bit(JobState::RUN)); !st) return st;
  auto d = required_string(ctx, ev, "description");
  if (!d) return d.error();
  s.prolog_actions.insert(*d);
  return {};
}

Status finish_action(std::set<std::string>& actions, const Event& ev, const json& ctx, bool& failed) {
  auto d = required_string(ctx, ev, "description");
  if (!d) return d.error();
  auto status = ctx_int(ctx, ev, "status");
  if (!status) return status.error();
  if (!actions.contains(*d)) return event_error(ev, "no action \"" + *d + "\" is running");
  actions.erase(*d);
  if (*status && **status != 0) failed = true;
  return {};
}

Status on_prolog_finish(JobStatus& s, const Event& ev, const json& ctx) {
  uint32_t mask = bit(JobState::SCHED) | bit(JobState::RUN) | bit(JobState::CLEANUP);
  if (auto st = require_state(s, ev, mask); !st) return st;
  return finish_action(s.prolog_actions, ev, ctx, s.prolog_failed);
}

Status on_start(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::RUN)); !st) return st;
  if (s.started) return event_error(ev, "the job was already started");
  if (!s.prolog_actions.empty()) {
    return event_error(ev, "prolog actions still running: " + join(s.prolog_actions));
  }
  s.started = true;
  return {};
}

// After a fatal exception the job is already in CLEANUP when its tasks exit.
Status on_finish(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::RUN) | bit(JobState::CLEANUP)); !st) {
    return st;
  }
  if (!s.started) return event_error(ev, "the job never started");
  if (s.finished) return event_error(ev, "the job already finished");
  auto status = required_int(ctx, ev, "status");
  if (!status) return status.error();
  s.finished = true;
  s.waitstatus = static_cast<int>(*status);
  if (s.state == JobState::RUN) enter(s, JobState::CLEANUP, ev.timestamp);
  return {};
}

Status on_release(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::RUN) | bit(JobState::CLEANUP)); !st) {
    return st;
  }
  auto it = ctx.find("final");
  if (it != ctx.end() && !it->is_boolean()) return event_error(ev, "context.final must be a boolean");
  if (auto r = ctx_string(ctx, ev, "ranks"); !r) return r.error();
  if (it != ctx.end() && it->get<bool>()) s.released = true;
  return {};
}

Status on_epilog_start(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::CLEANUP)); !st) return st;
  auto d = required_string(ctx, ev, "description");
  if (!d) return d.error();
  s.epilog_actions.insert(*d);
  return {};
}

Status on_epilog_finish(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, bit(JobState::CLEANUP)); !st) return st;
  bool failed = false;  // a failed epilog drains nodes; it does not change the job
  return finish_action(s.epilog_actions, ev, ctx, failed);
}

Status on_free(JobStatus& s, const Event& ev, const json&) {
  if (auto st = require_state(s, ev, bit(JobState::CLEANUP)); !st) return st;
  if (!s.allocated) return event_error(ev, "the job has no resources to free");
  if (s.freed) return event_error(ev, "resources were already freed");
  s.freed = true;
  return {};
}

// What `clean` and `requeue` both wait for: the end of CLEANUP.
Status cleanup_done(const JobStatus& s, const Event& ev) {
  if (auto st = require_state(s, ev, bit(JobState::CLEANUP)); !st) return st;
  if (!s.epilog_actions.empty()) {
    return event_error(ev, "epilog actions still running: " + join(s.epilog_actions));
  }
  if (s.allocated && !s.freed) return event_error(ev, "resources were not freed yet");
  return {};
}

Status on_clean(JobStatus& s, const Event& ev, const json&) {
  if (auto st = cleanup_done(s, ev); !st) return st;
  enter(s, JobState::INACTIVE, ev.timestamp);
  return {};
}

// A job whose run was lost to a node failure goes back to SCHED, once its resources are
// free, keeping its id, priority and eventlog; the next run starts from a clean slate.
Status on_requeue(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = cleanup_done(s, ev); !st) return st;
  if (auto note = ctx_string(ctx, ev, "note"); !note) return note.error();
  JobStatus next;
  next.state = JobState::SCHED;
  next.submitted = s.submitted;
  next.priority = s.priority;
  next.urgency = s.urgency;
  next.requeues = s.requeues + 1;
  next.t_submit = s.t_submit;
  s = std::move(next);
  return {};
}

Status on_exception(JobStatus& s, const Event& ev, const json& ctx) {
  if (auto st = require_state(s, ev, kActive); !st) return st;
  auto type = required_string(ctx, ev, "type");
  if (!type) return type.error();
  auto severity = required_int(ctx, ev, "severity");
  if (!severity) return severity.error();
  if (*severity < 0 || *severity > kMaxSeverity) {
    return event_error(ev, "severity " + std::to_string(*severity) + " is outside 0-7");
  }
  auto note = ctx_string(ctx, ev, "note");
  if (!note) return note.error();
  if (*type == "oom") s.out_of_memory = true;
  if (*type == "cancel") s.canceled = true;
  if (*severity != 0) return {};
  if (!s.fatal_exception) {
    s.fatal_exception = true;
    s.exception_type = *type;
    s.exception_note = note->value_or("");
  }
  if (s.state != JobState::CLEANUP) enter(s, JobState::CLEANUP, ev.timestamp);
  return {};
}

using Handler = Status (*)(JobStatus&, const Event&, const json&);
struct EventHandler {
  std::string_view name;
  Handler fn;
};
constexpr std::array<EventHandler, 21> kHandlers = {{
    {"submit", on_submit},
    {"validate", on_validate},
    {"invalidate", on_invalidate},
    {"dependency-add", on_dependency_add},
    {"dependency-remove", on_dependency_remove},
    {"depend", on_depend},
    {"priority", on_priority},
    {"urgency", on_urgency},
    {"alloc", on_alloc},
    {"prolog-start", on_prolog_start},
    {"prolog-finish", on_prolog_finish},
    {"start", on_start},
    {"finish", on_finish},
    {"release", on_release},
    {"epilog-start", on_epilog_start},
    {"epilog-finish", on_epilog_finish},
    {"free", on_free},
    {"clean", on_clean},
    {"requeue", on_requeue},
    {"exception", on_exception},
    {"memo", nullptr},  // annotations only: no state change
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<uint32_t> parse_one_state(std::string_view name) {
  std::string n = lower(name);
  if (n == "pending") return kPending;
  if (n == "running") return bit(JobState::RUN) | bit(JobState::CLEANUP);
  if (n == "active") return kActive;
  if (n == "all") return kActive | bit(JobState::INACTIVE);
  for (const auto& info : kStates) {
    if (lower(info.name) == n) return bit(info.state);
  }
  return invalid("unknown job state \"" + std::string(name) +
                 "\" (expected new, depend, priority, sched, run, cleanup, inactive, "
                 "pending, running, active or all)");
}

}  // namespace

std::string_view state_name(JobState s) {
  for (const auto& info : kStates) {
    if (info.state == s) return info.name;
  }
  return "UNKNOWN";
}

std::string_view state_abbrev(JobState s) {
  for (const auto& info : kStates) {
    if (info.state == s) return info.abbrev;
  }
  return "?";
}

// A comma-separated list ("sched,run") is accepted as the union of its states.
Result<uint32_t> parse_state_mask(std::string_view name) {
  uint32_t mask = 0;
  while (true) {
    auto comma = name.find(',');
    auto one = parse_one_state(name.substr(0, comma));
    if (!one) return one.error();
    mask |= *one;
    if (comma == std::string_view::npos) break;
    name = name.substr(comma + 1);
  }
  return mask;
}

Status apply_event(JobStatus& status, const Event& ev) {
  auto h = std::find_if(kHandlers.begin(), kHandlers.end(), [&](const EventHandler& e) { return e.name == ev.name; });
  // Unknown events (debug, hook events such as "cray-slingshot") carry information
  // for their readers and never change the state.
  if (h == kHandlers.end() || h->fn == nullptr) return {};
  json ctx = json::object();
  if (!ev.context.empty() && ev.context != "{}") {
    ctx = json::parse(ev.context, nullptr, false);
    if (ctx.is_discarded() || !ctx.is_object()) {
      return event_error(ev, "context is not a JSON object: " + ev.context);
    }
  }
  return h->fn(status, ev, ctx);
}

std::string job_result(const JobStatus& status) {
  if (status.fatal_exception) {
    if (status.exception_type == "cancel") return "CANCELED";
    if (status.exception_type == "timeout") return "TIMEOUT";
  }
  if (status.out_of_memory) return "OUT_OF_MEMORY";
  if (status.fatal_exception) return "FAILED";
  if (status.finished && status.waitstatus == 0) return "COMPLETED";
  return "FAILED";
}

}  // namespace corral::job
