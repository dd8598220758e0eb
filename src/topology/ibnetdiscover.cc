// `ibnetdiscover` output to a switch tree, as slurmibtopology does: switches with hosts
// are leaf switches, and switches linked only to switches are placed one level above the
// highest switches they link to, with those as children.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "topology/topology_build.h"
#include "topology/topology_generate.h"

namespace corral::topology {

namespace {

using detail::where;

struct IbSwitch {
  std::string guid;
  std::string description;
  unsigned line = 0;
  std::vector<std::string> hosts;       // first word of the HCAs' descriptions
  std::vector<std::string> peer_guids;  // switches on the other end of a link
};

// The text between the first pair of double quotes at or after `from`.
std::optional<std::string> quoted(const std::string& s, size_t from = 0) {
  const size_t a = s.find('"', from);
  if (a == std::string::npos) return std::nullopt;
  const size_t b = s.find('"', a + 1);
  if (b == std::string::npos) return std::nullopt;
  return s.substr(a + 1, b - a - 1);
}

// The quoted node description after '#' ("# "desc" lid 3 ...").
std::string description_after_hash(const std::string& s) {
  const size_t hash = s.find('#');
  if (hash == std::string::npos) return {};
  return quoted(s, hash).value_or("");
}

// Mellanox switches describe themselves as "MF0;HOST:MODEL/U1": the HOST part names them.
// Anything that cannot be in a switch name becomes '_'.
std::string switch_name_from(const std::string& desc) {
  std::string name = desc;
  if (const size_t semi = name.find(';'); semi != std::string::npos) name = name.substr(semi + 1);
  if (const size_t colon = name.find(':'); colon != std::string::npos) name = name.substr(0, colon);
  std::string out;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    out += ok ? c : '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  while (!out.empty() && out.front() == '_') out.erase(out.begin());
  return out;
}

// "node001 HCA-1" -> "node001"; aggregation nodes and unnamed HCAs are not hosts.
std::string host_from(const std::string& desc) {
  if (desc.find("Aggregation Node") != std::string::npos) return {};
  std::istringstream in(desc);
  std::string word;
  in >> word;
  if (word.find_first_of(",[]{}=") != std::string::npos) return {};
  return word;
}

Status parse_link(IbSwitch& sw, const std::string& line) {
  auto peer = quoted(line);
  if (!peer) return {};  // "[4] "none"[]" style lines and the like carry no link
  if (peer->rfind("S-", 0) == 0) {
    sw.peer_guids.push_back(*peer);
  } else if (peer->rfind("H-", 0) == 0) {
    std::string host = host_from(description_after_hash(line));
    if (!host.empty() && std::find(sw.hosts.begin(), sw.hosts.end(), host) == sw.hosts.end())
      sw.hosts.push_back(std::move(host));
  }
  return {};
}

Result<std::vector<IbSwitch>> parse_switches(const std::string& text, const std::string& file) {
  std::vector<IbSwitch> out;
  std::istringstream in(text);
  std::string line;
  unsigned lineno = 0;
  bool in_switch = false;
  while (std::getline(in, line)) {
    ++lineno;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) {
      in_switch = false;
      continue;
    }
    const std::string body = line.substr(first);
    if (body.rfind("Switch", 0) == 0 && body.size() > 6 && std::isspace(static_cast<unsigned char>(body[6]))) {
      auto guid = quoted(body);
      if (!guid || guid->rfind("S-", 0) != 0)
        return invalid(fmt::format("{}: a Switch line without its \"S-GUID\"", where(file, lineno)));
      out.push_back({*guid, description_after_hash(body), lineno, {}, {}});
      in_switch = true;
    } else if (body.front() == '[' && in_switch) {
      if (auto st = parse_link(out.back(), body); !st) return st.error();
    } else if (body.front() != '[') {
      in_switch = false;  // vendid=, Ca, Rt, comments: another node's block
    }
  }
  if (out.empty()) return invalid(fmt::format("{}: no \"Switch\" entries found: is this ibnetdiscover output?", file));
  return out;
}

// Unique switch names: the sanitized description when it is unique, else s<N>.
std::vector<std::string> switch_names(const std::vector<IbSwitch>& sws) {
  std::vector<std::string> names;
  std::map<std::string, unsigned> count;
  for (const IbSwitch& s : sws) count[switch_name_from(s.description)]++;
  std::set<std::string> used;
  for (size_t i = 0; i < sws.size(); ++i) {
    std::string n = switch_name_from(sws[i].description);
    if (n.empty() || count[n] > 1 || used.count(n)) n = fmt::format("s{}", i);
    while (used.count(n)) n += "_";
    used.insert(n);
    names.push_back(n);
  }
  return names;
}

// Level of every switch: 0 for switches with hosts, then one above the highest level
// reached so far among the switches linked to it; switches reached from no leaf are left out.
std::vector<int> switch_levels(const std::vector<IbSwitch>& sws, const std::vector<std::vector<uint32_t>>& links) {
  std::vector<int> level(sws.size(), -1);
  std::vector<uint32_t> frontier;
  for (uint32_t i = 0; i < sws.size(); ++i)
    if (!sws[i].hosts.empty()) level[i] = 0, frontier.push_back(i);
  for (int l = 1; !frontier.empty(); ++l) {
    std::vector<uint32_t> next;
    for (uint32_t s : frontier)
      for (uint32_t p : links[s])
        if (level[p] < 0) level[p] = l, next.push_back(p);
    frontier = std::move(next);
  }
  return level;
}

}  // namespace

Result<Topology> from_ibnetdiscover(const std::string& text, const std::string& file) {
  auto parsed = parse_switches(text, file);
  if (!parsed) return parsed.error();
  const std::vector<IbSwitch>& sws = *parsed;
  std::unordered_map<std::string, uint32_t> by_guid;
  for (uint32_t i = 0; i < sws.size(); ++i) by_guid.emplace(sws[i].guid, i);
  std::vector<std::vector<uint32_t>> links(sws.size());
  for (uint32_t i = 0; i < sws.size(); ++i)
    for (const std::string& g : sws[i].peer_guids)
      if (auto it = by_guid.find(g); it != by_guid.end() && it->second != i) {
        auto& l = links[i];
        if (std::find(l.begin(), l.end(), it->second) == l.end()) l.push_back(it->second);
      }
  const std::vector<int> level = switch_levels(sws, links);
  if (std::none_of(level.begin(), level.end(), [](int l) { return l == 0; }))
    return invalid(
        fmt::format("{}: no switch has hosts attached (no \"H-\" links with a "
                    "host name in their description)",
                    file));
  const std::vector<std::string> names = switch_names(sws);

  // A host cabled to two switches (dual-rail) stays on the first one. Levels are built
  // bottom up so a switch left empty is not named as a child.
  std::set<std::string> placed;
  std::vector<detail::SwitchDef> defs(sws.size());
  std::vector<bool> kept(sws.size(), false);
  const int top = *std::max_element(level.begin(), level.end());
  for (int l = 0; l <= top; ++l) {
    for (uint32_t i = 0; i < sws.size(); ++i) {
      if (level[i] != l) continue;
      detail::SwitchDef& d = defs[i];
      d.name = names[i];
      d.line = sws[i].line;
      for (const std::string& h : sws[i].hosts)
        if (placed.insert(h).second) d.nodes.push_back(h);
      for (uint32_t p : links[i])
        if (l > 0 && level[p] == l - 1 && kept[p]) d.children.push_back(names[p]);
      kept[i] = !d.nodes.empty() || !d.children.empty();
    }
  }
  std::vector<detail::SwitchDef> out;
  for (uint32_t i = 0; i < sws.size(); ++i)
    if (kept[i]) out.push_back(std::move(defs[i]));
  Topology t;
  t.kind = Kind::tree;
  if (auto st = detail::build_switches(t, std::move(out), file); !st) return st.error();
  return t;
}

}  // namespace corral::topology
