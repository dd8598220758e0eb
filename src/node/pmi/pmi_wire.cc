#include "node/pmi/pmi_wire.h"

#include <algorithm>

namespace corral::node::pmi {

namespace {

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

// Enough of a line or word to recognise it in a log.
std::string shorten(std::string_view text) {
  constexpr std::size_t kShown = 60;
  std::string shown(text.substr(0, kShown));
  if (text.size() > kShown) shown += "...";
  return shown;
}

Error bad_line(std::string_view line, const std::string& why) {
  return invalid("malformed PMI command '" + shorten(line) + "': " + why);
}

Status parse_head(std::string_view line, std::string_view head, Command& out) {
  auto eq = head.find('=');
  std::string_view key = head.substr(0, eq);
  if (eq == std::string_view::npos || (key != "cmd" && key != "mcmd"))
    return bad_line(line, "it must start with cmd=NAME");
  out.name = std::string(head.substr(eq + 1));
  out.multi_line = key == "mcmd";
  if (out.name.empty()) return bad_line(line, "the command name is empty");
  return {};
}

}  // namespace

const std::string* Command::arg(const std::string& key) const {
  auto it = args.find(key);
  return it == args.end() ? nullptr : &it->second;
}

Result<Command> parse_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  for (char c : line) {
    if (static_cast<unsigned char>(c) < 0x20) return bad_line(line, "it contains a control character");
  }
  auto tokens = split_spaces(line);
  if (tokens.empty()) return bad_line(line, "the line is empty");
  Command cmd;
  if (auto st = parse_head(line, tokens[0], cmd); !st) return st.error();
  std::string* last = nullptr;
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    auto eq = tokens[i].find('=');
    if (eq == std::string_view::npos) {
      // A word without '=' continues the previous value: MPICH's abort may send a
      // message with spaces in it.
      if (!last) return bad_line(line, "'" + shorten(tokens[i]) + "' is not key=value");
      *last += ' ';
      *last += tokens[i];
      continue;
    }
    if (eq == 0) return bad_line(line, "'" + shorten(tokens[i]) + "' has an empty key");
    auto [it, inserted] = cmd.args.emplace(std::string(tokens[i].substr(0, eq)), std::string(tokens[i].substr(eq + 1)));
    if (!inserted) return bad_line(line, "key '" + shorten(it->first) + "' appears twice");
    last = &it->second;
  }
  return cmd;
}

std::string format_reply(std::string_view name, const std::vector<std::pair<std::string, std::string>>& args) {
  std::string out = "cmd=";
  out += name;
  for (const auto& [key, value] : args) {
    out += ' ';
    out += key;
    out += '=';
    for (char c : value) out += (c == ' ' || c == '\n' || c == '\r' || c == '\t') ? '_' : c;
  }
  out += '\n';
  return out;
}

std::optional<std::size_t> parse_v2_length(std::string_view head) {
  if (head.size() != kV2LengthChars) return std::nullopt;
  // MPICH writes "%6d" (right-aligned), Slurm's libpmi2 "%-6d" (left-aligned).
  std::size_t i = 0, n = 0;
  while (i < head.size() && head[i] == ' ') ++i;
  const std::size_t first = i;
  for (; i < head.size() && head[i] >= '0' && head[i] <= '9'; ++i) n = n * 10 + static_cast<std::size_t>(head[i] - '0');
  if (i == first) return std::nullopt;
  for (; i < head.size(); ++i)
    if (head[i] != ' ') return std::nullopt;
  return n;
}

Result<Command> parse_v2(std::string_view message) {
  for (char c : message) {
    if (static_cast<unsigned char>(c) < 0x20) return bad_line(message, "it contains a control character");
  }
  Command cmd;
  bool first = true;
  std::size_t i = 0;
  while (i < message.size()) {
    std::size_t end = message.find(';', i);
    if (end == std::string_view::npos) end = message.size();
    std::string_view token = message.substr(i, end - i);
    i = end + 1;
    if (token.empty()) continue;
    if (first) {
      if (auto st = parse_head(message, token, cmd); !st) return st.error();
      if (cmd.multi_line) return bad_line(message, "it must start with cmd=NAME");
      first = false;
      continue;
    }
    auto eq = token.find('=');
    if (eq == 0) return bad_line(message, "'" + shorten(token) + "' has an empty key");
    std::string key(token.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : std::string(token.substr(eq + 1));
    auto [it, inserted] = cmd.args.emplace(std::move(key), std::move(value));
    if (!inserted) return bad_line(message, "key '" + shorten(it->first) + "' appears twice");
  }
  if (first) return bad_line(message, "the message is empty");
  return cmd;
}

std::string format_v2(std::string_view name, const std::vector<std::pair<std::string, std::string>>& args) {
  std::string body = "cmd=";
  body += name;
  body += ';';
  for (const auto& [key, value] : args) {
    body += key;
    body += '=';
    for (char c : value) body += (c == ';') ? ',' : (static_cast<unsigned char>(c) < 0x20 ? '_' : c);
    body += ';';
  }
  std::string len = std::to_string(body.size());
  return std::string(kV2LengthChars - std::min(len.size(), kV2LengthChars), ' ') + len + body;
}

}  // namespace corral::node::pmi
