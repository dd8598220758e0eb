#include "cli/job_row.h"

#include <fmt/format.h>

#include "cli/job_format.h"

namespace corral::cli {

namespace pb = corral::v1;

namespace {

bool is_pending(std::string_view state) {
  return state == "NEW" || state == "DEPEND" || state == "PRIORITY" || state == "SCHED";
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
  }
  out += '"';
}

// Writes `"key": value` lines of one object, commas between them.
class ObjectWriter {
 public:
  ObjectWriter(std::string& out, int indent) : out_(out), indent_(indent) { out_ += "{"; }
  ~ObjectWriter() {
    out_ += '\n';
    out_.append(static_cast<size_t>(indent_), ' ');
    out_ += '}';
  }
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  std::string& key(std::string_view k) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_.append(static_cast<size_t>(indent_ + 2), ' ');
    append_json_string(out_, k);
    out_ += ": ";
    return out_;
  }
  void text(std::string_view k, std::string_view v) { append_json_string(key(k), v); }
  template <class Number>
  void number(std::string_view k, Number v) {
    fmt::format_to(std::back_inserter(key(k)), "{}", v);
  }
  void list(std::string_view k, std::string_view comma_separated) {
    std::string& o = key(k);
    if (comma_separated.empty()) {
      o += "[]";
      return;
    }
    o += "[";
    const std::string pad(static_cast<size_t>(indent_ + 4), ' ');
    size_t start = 0;
    while (true) {
      size_t end = comma_separated.find(',', start);
      o += "\n" + pad;
      append_json_string(o, comma_separated.substr(start, end - start));
      if (end == std::string_view::npos) break;
      o += ',';
      start = end + 1;
    }
    o += '\n';
    o.append(static_cast<size_t>(indent_ + 2), ' ');
    o += ']';
  }

 private:
  std::string& out_;
  int indent_;
  bool first_ = true;
};

std::string_view text_at(const pb::JobTable& t, uint32_t index) { return t.strings(static_cast<int>(index)); }

}  // namespace

JobRow row_of(const pb::JobInfo& j, std::string& deps) {
  deps.clear();
  for (const auto& d : j.dependencies()) deps += (deps.empty() ? "" : ",") + d;
  JobRow r;
  r.id = j.id();
  r.userid = j.userid();
  r.username = j.username();
  r.name = j.name();
  r.state = j.state();
  r.result = j.result();
  r.reason = j.reason();
  r.urgency = j.urgency();
  r.priority = j.priority();
  r.t_submit = j.t_submit();
  r.t_run = j.t_run();
  r.t_cleanup = j.t_cleanup();
  r.t_inactive = j.t_inactive();
  r.nodelist = j.nodelist();
  r.nnodes = j.nnodes();
  r.ntasks = j.ntasks();
  r.ncores = j.ncores();
  r.ngpus = j.ngpus();
  r.partition = j.partition();
  r.duration = j.duration();
  r.waitstatus = j.waitstatus();
  r.exception_type = j.exception_type();
  r.exception_note = j.exception_note();
  r.cwd = j.cwd();
  r.dependencies = deps;
  return r;
}

bool table_is_consistent(const pb::JobTable& t) {
  const int n = t.id_size();
  const int sizes[] = {t.userid_size(),         t.username_size(),       t.name_size(),      t.state_size(),
                       t.result_size(),         t.reason_size(),         t.urgency_size(),   t.priority_size(),
                       t.t_submit_size(),       t.t_run_size(),          t.t_cleanup_size(), t.t_inactive_size(),
                       t.nodelist_size(),       t.nnodes_size(),         t.ntasks_size(),    t.ncores_size(),
                       t.ngpus_size(),          t.partition_size(),      t.duration_size(),  t.waitstatus_size(),
                       t.exception_type_size(), t.exception_note_size(), t.cwd_size(),       t.dependencies_size()};
  for (int s : sizes)
    if (s != n) return false;
  const auto strings = static_cast<uint32_t>(t.strings_size());
  for (const auto* col : {&t.username(), &t.name(), &t.state(), &t.result(), &t.reason(), &t.nodelist(), &t.partition(),
                          &t.exception_type(), &t.exception_note(), &t.cwd(), &t.dependencies()})
    for (uint32_t v : *col)
      if (v >= strings) return false;
  return true;
}

JobRow row_at(const pb::JobTable& t, int i) {
  JobRow r;
  r.id = t.id(i);
  r.userid = t.userid(i);
  r.username = text_at(t, t.username(i));
  r.name = text_at(t, t.name(i));
  r.state = text_at(t, t.state(i));
  r.result = text_at(t, t.result(i));
  r.reason = text_at(t, t.reason(i));
  r.urgency = t.urgency(i);
  r.priority = t.priority(i);
  r.t_submit = t.t_submit(i);
  r.t_run = t.t_run(i);
  r.t_cleanup = t.t_cleanup(i);
  r.t_inactive = t.t_inactive(i);
  r.nodelist = text_at(t, t.nodelist(i));
  r.nnodes = t.nnodes(i);
  r.ntasks = t.ntasks(i);
  r.ncores = t.ncores(i);
  r.ngpus = t.ngpus(i);
  r.partition = text_at(t, t.partition(i));
  r.duration = t.duration(i);
  r.waitstatus = t.waitstatus(i);
  r.exception_type = text_at(t, t.exception_type(i));
  r.exception_note = text_at(t, t.exception_note(i));
  r.cwd = text_at(t, t.cwd(i));
  r.dependencies = text_at(t, t.dependencies(i));
  return r;
}

std::string_view short_state(const JobRow& job) {
  const std::string_view s = job.state;
  if (is_pending(s)) return "PD";
  if (s == "RUN") return "R";
  if (s == "CLEANUP") return "CG";
  if (s != "INACTIVE") return s;
  if (job.result == "COMPLETED") return "CD";
  if (job.result == "CANCELED") return "CA";
  if (job.result == "TIMEOUT") return "TO";
  if (job.result == "OUT_OF_MEMORY") return "OOM";
  return "F";
}

double run_time(const JobRow& job, double now) {
  if (job.t_run <= 0) return 0;
  double end = job.t_cleanup > 0 ? job.t_cleanup : now;
  return end > job.t_run ? end - job.t_run : 0;
}

void append_job_json(std::string& out, const JobRow& j, int indent) {
  ObjectWriter o(out, indent);
  o.number("id", j.id);
  o.number("userid", j.userid);
  o.text("username", j.username);
  o.text("name", j.name);
  o.text("state", j.state);
  o.text("result", j.result);
  o.text("reason", j.reason);
  o.number("urgency", j.urgency);
  o.number("priority", j.priority);
  o.number("t_submit", j.t_submit);
  o.number("t_run", j.t_run);
  o.number("t_cleanup", j.t_cleanup);
  o.number("t_inactive", j.t_inactive);
  o.text("nodelist", j.nodelist);
  o.number("nnodes", j.nnodes);
  o.number("ntasks", j.ntasks);
  o.number("ncores", j.ncores);
  o.number("ngpus", j.ngpus);
  o.text("partition", j.partition);
  o.number("duration", j.duration);
  o.number("waitstatus", j.waitstatus);
  if (j.waitstatus >= 0)
    o.number("exit_code", shell_exit_code(j.waitstatus));
  else
    o.key("exit_code") += "null";
  o.text("exception_type", j.exception_type);
  o.text("exception_note", j.exception_note);
  o.text("cwd", j.cwd);
  o.list("dependencies", j.dependencies);
}

}  // namespace corral::cli
