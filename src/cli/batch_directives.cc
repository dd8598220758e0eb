#include "cli/batch_directives.h"

#include <cctype>

#include <fmt/format.h>

namespace corral::cli {

namespace {

constexpr std::string_view kPrefix = "#CORRAL";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_directive(std::string_view line) {
  if (line.substr(0, kPrefix.size()) != kPrefix) return false;
  return line.size() == kPrefix.size() || std::isspace(static_cast<unsigned char>(line[kPrefix.size()]));
}

}  // namespace

Result<std::vector<std::string>> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else if (c == '\\') {
      if (i + 1 == line.size()) return invalid("a backslash ends the line");
      word += line[++i];
      in_word = true;
    } else if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) return invalid("unterminated ' quote");
      word.append(line.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[j + 1]) != std::string_view::npos)
          ++j;
        word += line[j];
      }
      if (j == line.size()) return invalid("unterminated \" quote");
      i = j;
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<std::vector<Directive>> find_directives(std::string_view script) {
  if (script.substr(0, 2) != "#!")
    return invalid(
        "1: the script must start with a '#!' line naming its interpreter "
        "(e.g. #!/bin/sh)");
  std::vector<Directive> out;
  size_t lineno = 0;
  while (!script.empty()) {
    size_t nl = script.find('\n');
    std::string_view raw = script.substr(0, nl);
    script.remove_prefix(nl == std::string_view::npos ? script.size() : nl + 1);
    if (++lineno == 1) continue;  // the #! line
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.front() != '#') break;    // the first command ends the directives
    if (line.rfind("#DW ", 0) == 0) {  // Rabbit storage, kept as written
      out.push_back({lineno, std::string(line), {}});
      continue;
    }
    if (!is_directive(line)) continue;
    auto words = split_words(line.substr(kPrefix.size()));
    if (!words) return invalid(fmt::format("{}: {}: {}", lineno, line, words.message()));
    out.push_back({lineno, std::string(line), std::move(*words)});
  }
  return out;
}

Result<JobOptions> directive_options(std::string_view script, std::string_view script_name, const JobContext& ctx) {
  auto directives = find_directives(script);
  if (!directives) return invalid(fmt::format("{}:{}", script_name, directives.message()));
  JobOptions merged;
  for (const Directive& d : *directives) {
    auto where = [&](const std::string& msg) {
      return invalid(fmt::format("{}:{}: {}: {}", script_name, d.line, d.text, msg));
    };
    if (d.text.rfind("#DW ", 0) == 0) {
      merged.dw.push_back(d.text);
      continue;
    }
    auto opts = parse_job_option_words(d.words);
    if (!opts) return where(opts.message());
    if (auto checked = to_job_request(*opts, ctx); !checked) return where(checked.message());
    merged = merge_job_options(merged, *opts);
  }
  return merged;
}

}  // namespace corral::cli
