// corral queue: the jobs, as squeue shows them (or as JSON for scripts).
#include <charconv>
#include <cstdio>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_row.h"
#include "cli/table.h"
#include "cli/values.h"
#include "job/eventlog.h"
#include "job/job_state.h"
#include "util/units.h"

namespace corral::cli {

namespace {

struct QueueState {
  bool all = false;
  std::vector<std::string> users, states, jobs;
  std::string partition;
  bool json = false;
  bool noheader = false;
  unsigned count = 0;
};

// Results are filtered here: the controller selects by state only.
const std::set<std::string>& result_names() {
  static const std::set<std::string> names{"completed", "failed", "canceled", "cancelled", "timeout"};
  return names;
}

// What the user selected by state: a mask for the controller's states, plus results.
struct StateFilter {
  uint32_t mask = 0;
  std::set<std::string> results;
  bool keep(const JobRow& j) const {
    if (results.empty()) return true;
    auto bit = job::parse_state_mask(j.state);
    return results.count(std::string(j.result)) || (bit && (*bit & mask));
  }
};

std::vector<std::string> expand(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items)
    for (auto& part : split_list(item)) out.push_back(std::move(part));
  return out;
}

pb::ListJobsRequest make_request(const QueueState& st, StateFilter& filter) {
  pb::ListJobsRequest req;
  for (const auto& u : expand(st.users)) {
    auto uid = parse_user("-u/--user", u);
    if (!uid) usage_error("queue", uid.message());
    req.add_userids(*uid);
  }
  for (auto s : expand(st.states)) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (result_names().count(s)) {
      filter.results.insert(result_name(s));
      req.add_states("inactive");
      continue;
    }
    auto mask = job::parse_state_mask(s);
    if (!mask) usage_error("queue", "-t/--states: " + mask.message());
    filter.mask |= *mask;
    req.add_states(s);
  }
  for (const auto& j : expand(st.jobs)) {
    auto id = parse_jobid(j);
    if (!id) usage_error("queue", "-j/--jobs: " + id.message());
    req.add_jobids(*id);
  }
  // Asking for jobs by id means wanting them whatever their state.
  if (req.states_size() == 0 && (st.all || req.jobids_size() > 0)) req.add_states("all");
  req.set_partition(st.partition);
  req.set_max_entries(st.count);
  return req;
}

// Row i of the table as the seven cells `corral queue` prints, each a view that stays
// valid until the next row is asked for: 100,000 rows are measured and written without a
// string per cell.
class QueueCells {
 public:
  QueueCells(const pb::JobTable& t, double now) : t_(t), now_(now) {
    text_.reserve(static_cast<size_t>(t.strings_size()));
    for (const auto& s : t.strings()) text_.emplace_back(s);
  }

  void operator()(int i, std::string_view* cells) {
    cells[0] = number(id_, t_.id(i));
    const std::string_view user = text(t_.username(i));
    cells[1] = user.empty() ? number(uid_, t_.userid(i)) : user;
    cells[2] = text(t_.name(i));
    JobRow j;
    j.state = text(t_.state(i));
    j.result = text(t_.result(i));
    j.t_run = t_.t_run(i);
    j.t_cleanup = t_.t_cleanup(i);
    const std::string_view st = short_state(j);
    cells[3] = st;
    const double ran = run_time(j, now_);
    if (ran > 0) {
      time_ = format_elapsed(ran);
      cells[4] = time_;
    } else {
      cells[4] = "0:00";  // format_elapsed(0), for every job that has not run
    }
    cells[5] = number(nodes_, t_.nnodes(i));
    cells[6] = nodelist_or_reason(i, st);
  }

 private:
  template <size_t N, class T>
  static std::string_view number(char (&buf)[N], T v) {
    auto end = std::to_chars(buf, buf + N, v).ptr;
    return {buf, static_cast<size_t>(end - buf)};
  }
  std::string_view text(uint32_t index) const { return text_[index]; }
  std::string_view paren(std::string_view s) {
    last_.assign(1, '(');
    last_ += s;
    last_ += ')';
    return last_;
  }
  std::string_view nodelist_or_reason(int i, std::string_view st) {
    if (st == "PD") {
      const std::string_view reason = text(t_.reason(i));
      return paren(reason.empty() ? "None" : reason);
    }
    if (const auto nodelist = text(t_.nodelist(i)); !nodelist.empty()) return nodelist;
    if (const auto ex = text(t_.exception_type(i)); !ex.empty()) return paren(ex);
    return {};
  }

  const pb::JobTable& t_;
  const double now_;
  std::vector<std::string_view> text_;
  char id_[24], uid_[16], nodes_[16];
  std::string time_, last_;
};

void print_table(const pb::JobTable& table, const std::vector<int>& rows, bool header) {
  using A = Table::Align;
  Table t(
      {{"JOBID", A::right}, {"USER"}, {"NAME"}, {"ST"}, {"TIME", A::right}, {"NODES", A::right}, {"NODELIST(REASON)"}});
  QueueCells cells(table, job::now());
  t.render_views(
      stdout, rows.size(), [&](size_t i, std::string_view* views) { cells(rows[i], views); }, header);
}

void print_json(const pb::JobTable& table, const std::vector<int>& rows) {
  std::string out = rows.empty() ? "[" : "[\n  ";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) out += ",\n  ";
    append_job_json(out, row_at(table, rows[i]), 2);
    if (out.size() >= (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  out += rows.empty() ? "]\n" : "\n]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run_queue(const Globals& g, const QueueState& st) {
  StateFilter filter;
  pb::ListJobsRequest req = make_request(st, filter);
  Client client(resolve_uri(g.uri));
  const auto table = expect_ok("queue", client.list_job_table(req));
  if (!table_is_consistent(table)) fail("queue", "the controller sent a malformed job table");
  if (!table.warning().empty()) fmt::print(stderr, "corral queue: warning: {}\n", table.warning());
  std::vector<int> rows;  // the ones the filter keeps
  rows.reserve(static_cast<size_t>(table.id_size()));
  for (int i = 0; i < table.id_size(); ++i)
    if (filter.results.empty() || filter.keep(row_at(table, i))) rows.push_back(i);
  if (st.json)
    print_json(table, rows);
  else
    print_table(table, rows, !st.noheader);
}

}  // namespace

void add_queue_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<QueueState>();
  CLI::App* sub = app.add_subcommand("queue", "List jobs (like squeue)");
  sub->footer(
      "Active jobs by default. ST is PD pending, R running, CG completing, CD completed,\n"
      "F failed, CA canceled, TO timed out. TIME is how long the job has run.");
  sub->add_flag("-a,--all", st->all, "Include recently finished jobs");
  sub->add_option("-u,--user", st->users,
                  "Only jobs of these users (names or uids, comma "
                  "separated or repeated)")
      ->type_name("USER");
  sub->add_option("-t,--states", st->states,
                  "Only jobs in these states: pending, running, active, inactive, all, state "
                  "names (sched, run, ...) or results (completed, failed, canceled, timeout)")
      ->type_name("STATES");
  sub->add_option("-p,--partition", st->partition, "Only jobs in this partition")->type_name("NAME");
  sub->add_option("-j,--jobs", st->jobs, "Only these job ids")->type_name("IDS");
  sub->add_option("-c,--count", st->count, "At most this many jobs")->type_name("N");
  sub->add_flag("--json", st->json, "Print a JSON array of job objects");
  sub->add_flag("--noheader", st->noheader, "Leave out the header line");
  sub->callback([&g, st] { run_queue(g, *st); });
}

}  // namespace corral::cli
