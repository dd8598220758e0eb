#include "storage/dws/job_directives.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace corral::storage::dws {

using nlohmann::json;

namespace {

Status split_into(const std::string& text, std::vector<std::string>& out, size_t max_count) {
  if (text.size() > kMaxDirectiveText * max_count)
    return invalid(fmt::format("attributes.system.dw: longer than {} bytes", kMaxDirectiveText * max_count));
  std::vector<size_t> starts;
  for (size_t p = text.find("#DW "); p != std::string::npos; p = text.find("#DW ", p + 4)) starts.push_back(p);
  auto trimmed = [](std::string piece) {
    auto b = piece.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return std::string();
    return piece.substr(b, piece.find_last_not_of(" \t\r\n") - b + 1);
  };
  std::string before = trimmed(text.substr(0, starts.empty() ? text.size() : starts[0]));
  if (!before.empty())
    return invalid(fmt::format("attributes.system.dw: '{}' is not a #DW directive", before.substr(0, 80)));
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    std::string piece = trimmed(text.substr(starts[i], end - starts[i]));
    if (piece.size() > kMaxDirectiveText)
      return invalid(fmt::format("#DW directive longer than {} bytes: {}...", kMaxDirectiveText, piece.substr(0, 60)));
    if (out.size() >= max_count) return invalid(fmt::format("a job may give at most {} #DW directives", max_count));
    out.push_back(std::move(piece));
  }
  return {};
}

}  // namespace

Result<std::vector<std::string>> job_directives(const json& jobspec, size_t max_count) {
  std::vector<std::string> out;
  if (!jobspec.is_object() || !jobspec.contains("attributes")) return out;
  const json& attrs = jobspec["attributes"];
  if (!attrs.is_object() || !attrs.contains("system") || !attrs["system"].is_object()) return out;
  const json& sys = attrs["system"];
  if (!sys.contains("dw")) return out;
  const json& dw = sys["dw"];
  if (dw.is_string()) {
    if (auto st = split_into(dw.get_ref<const std::string&>(), out, max_count); !st) return st.error();
  } else if (dw.is_array()) {
    if (dw.size() > max_count) return invalid(fmt::format("a job may give at most {} #DW directives", max_count));
    for (const auto& d : dw) {
      if (!d.is_string()) return invalid("attributes.system.dw: every entry must be a string");
      if (auto st = split_into(d.get_ref<const std::string&>(), out, max_count); !st) return st.error();
    }
  } else {
    return invalid("attributes.system.dw must be a string or a list of strings");
  }
  return out;
}

}  // namespace corral::storage::dws
