#include "node/exec/output_pattern.h"

namespace corral::node {

namespace {
// A field's value is one path component: the job name (the user's own text) or a node
// name may not add directories ("../x") or be "." / "..". Slurm keeps '/' in %x; a
// name then decides where output goes, which is what patterns must not do.
void append_component(std::string& out, std::string_view value) {
  if (value == "." || value == "..") {
    out.append(value.size(), '_');
    return;
  }
  for (char ch : value) out += ch == '/' || ch == '\0' ? '_' : ch;
}
}  // namespace

std::string expand_output_pattern(std::string_view pattern, const PatternVars& vars) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    char spec = pattern[i + 1];
    switch (spec) {
      case 'j':
        out += std::to_string(vars.jobid);
        break;
      case 't':
        out += std::to_string(vars.rank);
        break;
      case 'n':
        out += std::to_string(vars.node_index);
        break;
      case 'N':
        append_component(out, vars.node_name);
        break;
      case 'x':
        append_component(out, vars.job_name);
        break;
      case 'u':
        append_component(out, vars.user_name);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += c;
        continue;  // keep the '%' and let the next character be copied normally
    }
    ++i;
  }
  return out;
}

std::string resolve_path(std::string_view path, std::string_view cwd) {
  if (path.empty() || path.front() == '/' || cwd.empty()) return std::string(path);
  std::string out(cwd);
  if (out.back() != '/') out += '/';
  out += path;
  return out;
}

}  // namespace corral::node
