// The PMI-1 "simple" wire protocol MPICH's PMI client speaks over PMI_FD: one command per
// line, "cmd=NAME key=value key=value\n", replies in the same shape. Values may contain
// '=' (MPICH sends "value=segments=4"), never spaces or newlines.
// PMI-2's wire (after an "init pmi_version=2" line in PMI-1's): each message is its length
// in 6 characters (printf's "%6d"), then "cmd=NAME;key=value;...;". Values never contain
// ';' (there is no escape); a client may add "thrid=X", which its reply must carry back.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace corral::node::pmi {

// The limits get_maxes announces. MPICH's simple PMI client formats and reads every line
// in a 1024-byte buffer, so "cmd=put kvsname=<256> key=<64> value=<V>" must fit in it:
// hence 512 for values. MPICH splits longer values into "KEY-seg-i/n" keys by itself.
// kLineMax is the longest line the server buffers before it gives up on a task.
inline constexpr std::size_t kKvsNameMax = 256;
inline constexpr std::size_t kKeyMax = 64;
inline constexpr std::size_t kValueMax = 512;
inline constexpr std::size_t kLineMax = 4096;
// PMI-2 clients size their buffers by pmi2.h's PMI2_MAX_VALLEN (1024) and no line buffer
// limits them; a client library may add an encoding to that (src/node/pmi_client), hence twice it.
inline constexpr std::size_t kV2ValueMax = 2048;

struct Command {
  std::string name;  // "put", "barrier_in", ...; for a multi-line command, "spawn"
  std::map<std::string, std::string> args;
  // "mcmd=NAME": the first line of a multi-line command that runs up to a line "endcmd".
  bool multi_line = false;

  const std::string* arg(const std::string& key) const;
};

// `line` without its '\n'. invalid_argument errors name what is wrong with the line.
Result<Command> parse_line(std::string_view line);

inline constexpr std::size_t kV2LengthChars = 6;
// A PMI-2 message's length from its first 6 characters ("    42", or "42    " as Slurm's
// libpmi2 writes it); nullopt if they are not one (digits with spaces around them).
std::optional<std::size_t> parse_v2_length(std::string_view head);
// A PMI-2 message without its length.
Result<Command> parse_v2(std::string_view message);
// The length, then "cmd=NAME;k=v;...;"; a ';' inside a value becomes ','.
std::string format_v2(std::string_view name, const std::vector<std::pair<std::string, std::string>>& args = {});

// "cmd=NAME k=v ...\n". Whitespace inside a value is replaced by '_' so a reply always
// parses back into the same pairs (messages are the only values that could have any).
std::string format_reply(std::string_view name, const std::vector<std::pair<std::string, std::string>>& args = {});

}  // namespace corral::node::pmi
