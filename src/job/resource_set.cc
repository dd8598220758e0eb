// R version 1 with one corral extension: per-node memory lives in a top-level
// "corral" object, {"corral":{"memory_mb":{"<rank idset>":MB,...}}}, because RFC 20's
// R_lite children may only hold idsets. The object is written only when some node has
// memory, so R without memory is plain RFC 20 that other tools read unchanged.
#include "job/resource_set.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "util/hostlist.h"

namespace corral::job {
namespace {

// Far above any cluster, far below what would exhaust memory ("0-4294967295").
constexpr size_t kMaxRanks = 1u << 20;

using json = nlohmann::json;

std::vector<const RNode*> by_rank(const ResourceSet& r) {
  std::vector<const RNode*> nodes;
  nodes.reserve(r.nodes.size());
  for (const auto& n : r.nodes) nodes.push_back(&n);
  std::stable_sort(nodes.begin(), nodes.end(), [](const RNode* a, const RNode* b) { return a->rank < b->rank; });
  return nodes;
}

// Ranks whose children are identical share one R_lite entry; entries are ordered by
// their first rank.
json encode_r_lite(const std::vector<const RNode*>& nodes) {
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<std::pair<IdSet, const RNode*>> groups;
  for (const RNode* n : nodes) {
    auto key = std::make_pair(n->cores.encode(), n->gpus.encode());
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.emplace_back(IdSet(), n);
    groups[it->second].first.insert(n->rank);
  }
  json r_lite = json::array();
  for (const auto& [ranks, n] : groups) {
    json children = json::object();
    if (!n->cores.empty()) children["core"] = n->cores.encode();
    if (!n->gpus.empty()) children["gpu"] = n->gpus.encode();
    r_lite.push_back({{"rank", ranks.encode()}, {"children", std::move(children)}});
  }
  return r_lite;
}

json encode_memory(const std::vector<const RNode*>& nodes) {
  std::map<uint64_t, IdSet> by_size;
  for (const RNode* n : nodes) {
    if (n->memory_mb != 0) by_size[n->memory_mb].insert(n->rank);
  }
  json mem = json::object();
  for (const auto& [mb, ranks] : by_size) mem[ranks.encode()] = mb;
  return mem;
}

std::string quoted(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

Result<IdSet> parse_idset_field(const json& v, const std::string& path) {
  if (!v.is_string()) return invalid(path + ": must be an idset string, got " + quoted(v));
  auto ids = IdSet::parse(v.get<std::string>());
  if (!ids) return invalid(path + ": " + ids.message());
  return ids;
}

Status parse_children(const json& children, const std::string& path, RNode& proto) {
  if (!children.is_object()) return invalid(path + ": must be an object");
  for (const auto& [key, value] : children.items()) {
    auto ids = parse_idset_field(value, path + "." + key);
    if (!ids) return ids.status();
    if (key == "core") {
      proto.cores = *ids;
    } else if (key == "gpu") {
      proto.gpus = *ids;
    } else {
      return invalid(path + "." + key + ": unknown resource type (R version 1 has core and gpu)");
    }
  }
  return {};
}

Status parse_r_lite(const json& r_lite, std::map<uint32_t, RNode>& nodes) {
  if (!r_lite.is_array()) return invalid("execution.R_lite: must be an array");
  for (size_t i = 0; i < r_lite.size(); ++i) {
    std::string path = "execution.R_lite[" + std::to_string(i) + "]";
    const json& entry = r_lite[i];
    if (!entry.is_object()) return invalid(path + ": must be an object");
    if (!entry.contains("rank")) return invalid(path + ".rank: missing");
    auto ranks = parse_idset_field(entry["rank"], path + ".rank");
    if (!ranks) return ranks.status();
    if (nodes.size() + ranks->count() > kMaxRanks)
      return invalid(path + ".rank: R describes more than " + std::to_string(kMaxRanks) + " nodes");
    RNode proto;
    if (entry.contains("children")) {
      if (auto st = parse_children(entry["children"], path + ".children", proto); !st) return st;
    }
    for (uint32_t rank : ranks->to_vector()) {
      proto.rank = rank;
      if (!nodes.emplace(rank, proto).second) {
        return invalid(path + ".rank: rank " + std::to_string(rank) + " appears in more than one entry");
      }
    }
  }
  return {};
}

Status parse_nodelist(const json& list, std::map<uint32_t, RNode>& nodes) {
  if (!list.is_array()) return invalid("execution.nodelist: must be an array of hostlists");
  Hostlist hosts;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string path = "execution.nodelist[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return invalid(path + ": must be a hostlist string");
    auto hl = Hostlist::parse(list[i].get<std::string>());
    if (!hl) return invalid(path + ": " + hl.message());
    hosts.append(*hl);
  }
  if (hosts.count() != nodes.size()) {
    return invalid("execution.nodelist: names " + std::to_string(hosts.count()) + " hosts but R_lite has " +
                   std::to_string(nodes.size()) + " ranks");
  }
  size_t i = 0;
  for (auto& [rank, node] : nodes) node.name = hosts.hosts()[i++];
  return {};
}

Status parse_memory(const json& ext, std::map<uint32_t, RNode>& nodes) {
  if (!ext.is_object()) return invalid("corral: must be an object");
  auto mem = ext.find("memory_mb");
  if (mem == ext.end()) return {};
  if (!mem->is_object()) return invalid("corral.memory_mb: must be an object");
  for (const auto& [key, value] : mem->items()) {
    std::string path = "corral.memory_mb." + key;
    auto ranks = IdSet::parse(key);
    if (!ranks) return invalid(path + ": " + ranks.message());
    if (!value.is_number_unsigned()) {
      return invalid(path + ": must be a non-negative integer (MiB), got " + quoted(value));
    }
    for (uint32_t rank : ranks->to_vector()) {
      auto it = nodes.find(rank);
      if (it == nodes.end()) {
        return invalid(path + ": rank " + std::to_string(rank) + " is not in R_lite");
      }
      it->second.memory_mb = value.get<uint64_t>();
    }
  }
  return {};
}

Result<double> parse_time(const json& exec, const char* key) {
  auto it = exec.find(key);
  if (it == exec.end() || it->is_null()) return 0.0;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
    return invalid(std::string("execution.") + key + ": must be a non-negative number, got " + quoted(*it));
  }
  return it->get<double>();
}

Result<ResourceSet> parse_document(const json& doc) {
  if (!doc.is_object()) return invalid("R must be a JSON object");
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return invalid("version: unsupported R version " +
                   (version == doc.end() ? std::string("(missing)") : quoted(*version)) + " (corral reads version 1)");
  }
  auto exec = doc.find("execution");
  if (exec == doc.end() || !exec->is_object()) return invalid("execution: must be an object");
  auto r_lite = exec->find("R_lite");
  if (r_lite == exec->end()) return invalid("execution.R_lite: missing");
  std::map<uint32_t, RNode> nodes;
  if (auto st = parse_r_lite(*r_lite, nodes); !st) return st.error();
  if (auto list = exec->find("nodelist"); list != exec->end()) {
    if (auto st = parse_nodelist(*list, nodes); !st) return st.error();
  }
  if (auto ext = doc.find("corral"); ext != doc.end()) {
    if (auto st = parse_memory(*ext, nodes); !st) return st.error();
  }
  ResourceSet r;
  auto start = parse_time(*exec, "starttime");
  if (!start) return start.error();
  auto expiration = parse_time(*exec, "expiration");
  if (!expiration) return expiration.error();
  r.starttime = *start;
  r.expiration = *expiration;
  r.nodes.reserve(nodes.size());
  for (auto& [rank, node] : nodes) r.nodes.push_back(std::move(node));
  return r;
}

}  // namespace

std::string ResourceSet::nodelist() const {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const auto& n : nodes) names.push_back(n.name);
  return Hostlist(std::move(names)).encode();
}

unsigned ResourceSet::ncores() const {
  size_t total = 0;
  for (const auto& n : nodes) total += n.cores.count();
  return static_cast<unsigned>(total);
}

unsigned ResourceSet::ngpus() const {
  size_t total = 0;
  for (const auto& n : nodes) total += n.gpus.count();
  return static_cast<unsigned>(total);
}

std::string to_json(const ResourceSet& r) {
  auto nodes = by_rank(r);
  json exec = {{"R_lite", encode_r_lite(nodes)}, {"starttime", r.starttime}, {"expiration", r.expiration}};
  // The nodelist is only meaningful when every rank has a name.
  bool named = std::all_of(nodes.begin(), nodes.end(), [](const RNode* n) { return !n->name.empty(); });
  if (named) {
    std::vector<std::string> names;
    names.reserve(nodes.size());
    for (const RNode* n : nodes) names.push_back(n->name);
    exec["nodelist"] = json::array();
    if (!names.empty()) exec["nodelist"].push_back(Hostlist(std::move(names)).encode());
  }
  json doc = {{"version", 1}, {"execution", std::move(exec)}};
  json mem = encode_memory(nodes);
  if (!mem.empty()) doc["corral"] = {{"memory_mb", std::move(mem)}};
  return doc.dump();
}

Result<ResourceSet> parse_resource_set(std::string_view json_text) {
  try {
    return parse_document(json::parse(json_text));
  } catch (const json::parse_error& e) {
    return invalid("R is not valid JSON (error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {  // out_of_range: a number too large for a double
    return invalid(std::string("R is not valid JSON: ") + e.what());
  }
}

}  // namespace corral::job
