#include "cli/jobspec_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

namespace corral::cli {

Result<job::Jobspec> read_jobspec_file(const std::string& path) {
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "(stdin)" : path;
  std::string text;
  if (from_stdin) {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = in.str();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return io_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto spec = job::parse_jobspec(text);
  if (!spec) return invalid(fmt::format("{}: {}", name, spec.message()));
  return spec;
}

}  // namespace corral::cli
