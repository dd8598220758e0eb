#include "sim/cluster_config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include <toml++/toml.h>

namespace corral::sim {
namespace {

Status set_string(std::string& out, const toml::node& n, const std::string& where) {
  auto s = n.value<std::string>();
  if (!s) return invalid(where + ": expected a string");
  out = *s;
  return {};
}

Status set_count(unsigned& out, const toml::node& n, const std::string& where, int64_t min) {
  auto v = n.value<int64_t>();
  if (!n.is_integer() || !v || *v < min || *v > std::numeric_limits<unsigned>::max())
    return invalid(fmt::format("{}: expected a whole number of at least {}", where, min));
  out = static_cast<unsigned>(*v);
  return {};
}

Status apply_key(ClusterConfig& c, const std::string& key, const toml::node& n, const std::string& where) {
  if (key == "nodes") return set_string(c.nodes, n, where);
  if (key == "cores_per_node") return set_count(c.cores_per_node, n, where, 1);
  if (key == "gpus_per_node") return set_count(c.gpus_per_node, n, where, 0);
  if (key == "topology") return set_string(c.topology, n, where);
  if (key == "topology_name") return set_string(c.topology_name, n, where);
  return invalid(where +
                 ": unknown key (known: nodes, cores_per_node, gpus_per_node, "
                 "topology, topology_name)");
}

}  // namespace

Result<ClusterConfig> parse_cluster_config(std::string_view text, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    return invalid(fmt::format("{}:{}: {}", file, e.source().begin.line, e.description()));
  }
  ClusterConfig c;
  for (const auto& [k, v] : root) {
    std::string key(k.str());
    std::string where = fmt::format("{}:{}: {}", file, v.source().begin.line, key);
    if (auto st = apply_key(c, key, v, where); !st.ok()) return st.error();
  }
  namespace fs = std::filesystem;
  if (!c.topology.empty() && fs::path(c.topology).is_relative())
    c.topology = (fs::path(file).parent_path() / c.topology).lexically_normal().string();
  return c;
}

Result<ClusterConfig> load_cluster_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot read cluster config '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_cluster_config(text.str(), path);
}

}  // namespace corral::sim
