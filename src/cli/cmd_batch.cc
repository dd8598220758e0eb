// corral batch [OPTIONS] [SCRIPT|-] [ARGS...]: submit a batch script whose `#CORRAL`
// lines carry job options, like sbatch.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/batch_directives.h"
#include "cli/commands.h"
#include "cli/job_submit.h"

namespace corral::cli {

namespace {

struct BatchState {
  JobOptions job;
  SubmitFlags flags;
  bool parsable = false;
  std::vector<std::string> words;  // only if the words weren't split off before CLI11
};

struct Script {
  std::string name;  // for messages and the default job name
  std::string text;
};

Script read_script(const std::vector<std::string>& words) {
  const bool from_stdin = words.empty() || words.front() == "-";
  if (from_stdin) {
    if (words.empty() && ::isatty(0) == 1)
      usage_error("batch", "missing SCRIPT (give a file, or - to read the script from stdin)");
    std::ostringstream text;
    text << std::cin.rdbuf();
    return {"(stdin)", text.str()};
  }
  const std::string& path = words.front();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("batch", fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return {path, std::string(std::istreambuf_iterator<char>(in), {})};
}

void run_batch(const Globals& g, const BatchState& st) {
  const std::vector<std::string>& words = g.command.empty() ? st.words : g.command;
  if (words.size() > 1)
    usage_error("batch", fmt::format("unexpected argument '{}' after the script (script "
                                     "arguments are not supported; use --export to pass values)",
                                     words[1]));
  Script script = read_script(words);
  const JobContext ctx = current_context();
  auto directives = directive_options(script.text, script.name, ctx);
  if (!directives) usage_error("batch", directives.message());
  ParsedJob job = parse_or_exit("batch", merge_job_options(*directives, st.job), ctx);
  job.request.batch_script = script.text;
  if (job.request.name.empty())
    job.request.name = script.name == "(stdin)" ? "batch" : std::filesystem::path(script.name).filename().string();
  if (job.request.output.empty()) job.request.output = kDefaultJobOutput;
  pb::SubmitRequest req = build_submit_request("batch", job, st.flags);
  if (dry_run(st.flags, req)) return;
  Client client(resolve_uri(g.uri));
  for (uint64_t id : submit_request(client, "batch", st.flags, req)) {
    if (st.parsable)
      fmt::print("{}\n", id);
    else
      fmt::print("Submitted batch job {}\n", id);
  }
}

}  // namespace

void add_batch_command(CLI::App& app, Globals& g) {
  auto st = std::make_shared<BatchState>();
  CLI::App* sub = app.add_subcommand("batch", "Submit a batch script with #CORRAL option lines (like sbatch)");
  g.takes_command.insert("batch");
  add_job_options(*sub, st->job);
  sub->add_flag("--parsable", st->parsable, "Print only the job id");
  sub->add_flag("--dry-run", st->flags.dry_run, "Print the jobspec instead of submitting it");
  sub->add_flag("-v,--verbose", st->flags.verbose, "Say what is sent where");
  sub->add_option("SCRIPT", st->words, "The script (- or nothing: read it from stdin)")->expected(-1);
  sub->footer(
      "Lines '#CORRAL <options>' after the '#!' line, before the first command, set job\n"
      "options; options on the command line win. Output goes to corral-<jobid>.out unless\n"
      "-o/-e say otherwise.\n\n"
      "Example script:\n"
      "  #!/bin/bash\n"
      "  #CORRAL -N 2 -t 30\n"
      "  #CORRAL --job-name=sim\n"
      "  corral run -n 8 ./simulate");
  sub->callback([&g, st] { run_batch(g, *st); });
}

}  // namespace corral::cli
