// corral eventlog ID [-f] [-H]: a job's RFC 18 eventlog, raw JSON lines or human-readable.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client/client.h"
#include "cli/commands.h"
#include "cli/job_format.h"
#include "cli/job_ids.h"
#include "cli/job_watch.h"
#include "job/eventlog.h"

namespace corral::cli {

namespace {

struct EventlogState {
  std::string id;
  bool follow = false;
  bool human = false;
};

// Human form: "2024-05-01T10:00:00.123 [+1.502s] alloc key=value ...".
class EventPrinter {
 public:
  explicit EventPrinter(bool human) : human_(human) {}

  void print(const job::Event& ev) {
    if (!human_) {
      fmt::print("{}\n", job::encode_event(ev));
    } else {
      if (first_ < 0) first_ = ev.timestamp;
      const double ms = (ev.timestamp - static_cast<double>(static_cast<long>(ev.timestamp))) * 1000;
      fmt::print("{}.{:03d} [{:+.3f}s] {}{}\n", format_timestamp(ev.timestamp), static_cast<int>(ms),
                 ev.timestamp - first_, ev.name, context_text(ev.context));
    }
    std::fflush(stdout);  // for pipes while following
  }

 private:
  static std::string context_text(const std::string& context) {
    auto ctx = nlohmann::json::parse(context, nullptr, false);
    if (ctx.is_discarded() || !ctx.is_object()) return context == "{}" ? "" : " " + context;
    std::string out;
    for (const auto& [key, value] : ctx.items())
      out += fmt::format(" {}={}", key, value.is_string() ? value.get<std::string>() : value.dump());
    return out;
  }

  bool human_;
  double first_ = -1;
};

void print_stored(Client& client, uint64_t id, EventPrinter& printer) {
  pb::GetJobRequest req;
  req.set_jobid(id);
  req.set_with_eventlog(true);
  pb::JobInfo info = expect_ok("eventlog", client.get_job(req));
  for (const auto& line : info.eventlog()) {
    auto ev = job::decode_event(line);
    if (!ev) {
      fmt::print("{}\n", line);  // show what is there rather than hide it
      continue;
    }
    printer.print(*ev);
  }
}

void follow(Client& client, uint64_t id, EventPrinter& printer) {
  pb::GetJobRequest check;
  check.set_jobid(id);
  expect_ok("eventlog", client.get_job(check));  // an unknown id is an error, not a hang
  pb::WatchRequest req;
  req.add_jobids(id);
  req.set_history(true);
  req.set_until_inactive(true);
  Status st = follow_jobs(client, req, "eventlog", [&](const pb::WatchItem& item) {
    if (!item.has_event()) return;
    const auto& e = item.event();
    printer.print({e.timestamp(), e.name(), e.context().empty() ? "{}" : e.context()});
  });
  if (!st.ok()) fail_rpc("eventlog", st.error());
}

void run_eventlog(const Globals& g, const EventlogState& st) {
  const uint64_t id = parse_jobids_or_exit("eventlog", {st.id}).front();
  Client client(resolve_uri(g.uri));
  EventPrinter printer(st.human);
  if (st.follow)
    follow(client, id, printer);
  else
    print_stored(client, id, printer);
}

}  // namespace

void add_eventlog_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<EventlogState>();
  CLI::App* sub = app.add_subcommand("eventlog", "Print a job's eventlog: one JSON object per line (Flux RFC 18)");
  sub->add_option("ID", st->id, "The job id")->required();
  sub->add_flag("-f,--follow", st->follow, "Keep printing new events until the job is inactive");
  sub->add_flag("-H,--human", st->human, "Local times, time since the first event, and context as key=value");
  sub->callback([&g, st] { run_eventlog(g, *st); });
}

}  // namespace corral::cli
