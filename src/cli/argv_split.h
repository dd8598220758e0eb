// Finding where a subcommand's options end and its COMMAND begins, the way srun and
// flux run read their arguments: the first word that is not an option (or a value an
// option takes) starts the command, as does the word after "--".
#pragma once

#include <set>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace corral::cli {

// Index of the first word of args[from..] that is not an option of `app` or an option's
// value; "--" itself is skipped (`*after_dashdash` set). Returns args.size() if none.
size_t find_positional(const CLI::App& app, const std::vector<std::string>& args, size_t from,
                       bool* after_dashdash = nullptr);

// Splits args (without the program name) for the top-level app: if the subcommand named
// is in `takes_command`, its trailing command words are removed from args and returned.
std::vector<std::string> split_trailing_command(const CLI::App& app, const std::set<std::string>& takes_command,
                                                std::vector<std::string>& args);

}  // namespace corral::cli
