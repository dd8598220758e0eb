#include "cli/argv_split.h"

#include <algorithm>

#include <CLI/CLI.hpp>

namespace corral::cli {

namespace {

// How many words an option word uses: 1, or 2 when its value is the next word.
size_t option_words(const CLI::App& app, const std::string& word) {
  const bool is_long = word.rfind("--", 0) == 0;
  if (is_long && word.find('=') != std::string::npos) return 1;
  const std::string name = is_long ? word : word.substr(0, 2);
  // Options of a parent fall through to subcommands (`corral run --uri X cmd`).
  const CLI::Option* opt = nullptr;
  for (const CLI::App* a = &app; a != nullptr && opt == nullptr; a = a->get_parent())
    opt = a->get_option_no_throw(name);
  if (opt == nullptr || opt->get_expected_min() == 0) return 1;  // unknown: CLI11 says so
  if (!is_long && word.size() > 2) return 1;                     // "-N2"
  return 2;
}

}  // namespace

size_t find_positional(const CLI::App& app, const std::vector<std::string>& args, size_t from, bool* after_dashdash) {
  size_t i = from;
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--") {
      if (after_dashdash) *after_dashdash = true;
      return i + 1;
    }
    if (a.size() < 2 || a[0] != '-') return i;
    i += option_words(app, a);
  }
  return args.size();
}

std::vector<std::string> split_trailing_command(const CLI::App& app, const std::set<std::string>& takes_command,
                                                std::vector<std::string>& args) {
  bool dashdash = false;
  const size_t sub_at = find_positional(app, args, 0, &dashdash);
  if (dashdash || sub_at >= args.size()) return {};
  const std::string& name = args[sub_at];
  if (takes_command.count(name) == 0) return {};
  const CLI::App* sub = app.get_subcommand(name);
  dashdash = false;
  const size_t cmd_at = find_positional(*sub, args, sub_at + 1, &dashdash);
  std::vector<std::string> command(args.begin() + static_cast<long>(cmd_at), args.end());
  // Drop the words and a "--" that led them, so CLI11 sees only the options.
  size_t cut = dashdash ? cmd_at - 1 : cmd_at;
  args.erase(args.begin() + static_cast<long>(cut), args.end());
  return command;
}

}  // namespace corral::cli
