#include "fabric/slingshot/sim_cxi_config.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <toml++/toml.h>

namespace corral::fabric::slingshot {

namespace {

constexpr uint32_t kMaxNics = 64;
constexpr size_t kMaxVnis = 4;
constexpr size_t kMaxMembers = 2;  // CXI_SVC_MAX_MEMBERS

size_t idx(Rsrc r) { return static_cast<size_t>(r); }

Result<Rsrc> parse_rsrc(std::string_view key, const std::string& where) {
  for (size_t i = 0; i < kNumRsrc; ++i)
    if (key == rsrc_name(static_cast<Rsrc>(i))) return static_cast<Rsrc>(i);
  return invalid(fmt::format("{}: unknown resource '{}' (ptes, txqs, tgqs, eqs, cts, les, tles, acs)", where, key));
}

Result<uint32_t> get_count(const toml::node& n, const std::string& where, uint64_t max) {
  auto v = n.is_integer() ? n.value<int64_t>() : std::nullopt;  // a float's conversion is undefined
  if (!v || *v < 0 || static_cast<uint64_t>(*v) > max)
    return invalid(fmt::format("{}: expected an integer from 0 to {}", where, max));
  return static_cast<uint32_t>(*v);
}

Result<const toml::table*> get_table(const toml::node& n, const std::string& where) {
  const auto* t = n.as_table();
  if (!t) return invalid(fmt::format("{}: expected a table", where));
  return t;
}

Result<std::string> get_string(const toml::node& n, const std::string& where) {
  auto s = n.value<std::string>();
  if (!s) return invalid(fmt::format("{}: expected a string", where));
  return *s;
}

template <class T, class F>
Result<std::vector<T>> get_list(const toml::node& n, const std::string& where, F&& item) {
  const auto* arr = n.as_array();
  if (!arr) return invalid(fmt::format("{}: expected an array", where));
  std::vector<T> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    Result<T> v = item(*arr->get(i), fmt::format("{}[{}]", where, i));
    if (!v) return v.error();
    out.push_back(std::move(*v));
  }
  return out;
}

// [capacity]: ptes = 2048, ...
Status apply_capacity(Limits& cap, const toml::table& t, const std::string& where) {
  for (const auto& [k, v] : t) {
    const std::string at = fmt::format("{}.{}", where, k.str());
    auto r = parse_rsrc(k.str(), at);
    if (!r) return r.error();
    auto n = get_count(v, at, UINT16_MAX);  // the driver counts in 16 bits
    if (!n) return n.error();
    cap[idx(*r)].max = *n;
  }
  return {};
}

// [system-service.limits]: txqs = { reserved = 16, max = 1024 } (max defaults to capacity).
Status apply_limits(ServiceDesc& d, const toml::table& t, const Limits& cap, const std::string& where) {
  d.limited = true;
  for (size_t i = 0; i < kNumRsrc; ++i) d.limits[i] = {0, cap[i].max};
  for (const auto& [k, v] : t) {
    const std::string at = fmt::format("{}.{}", where, k.str());
    auto r = parse_rsrc(k.str(), at);
    if (!r) return r.error();
    auto tab = get_table(v, at);
    if (!tab) return tab.error();
    Limit& l = d.limits[idx(*r)];
    for (const auto& [lk, lv] : **tab) {
      const std::string lat = fmt::format("{}.{}", at, lk.str());
      auto n = get_count(lv, lat, UINT16_MAX);
      if (!n) return n.error();
      if (lk.str() == "reserved")
        l.reserved = *n;
      else if (lk.str() == "max")
        l.max = *n;
      else
        return invalid(fmt::format("{}: unknown key (reserved, max)", lat));
    }
    if (l.reserved > l.max) return invalid(fmt::format("{}: reserved {} is above max {}", at, l.reserved, l.max));
  }
  return {};
}

Status apply_service_key(SimSystemService& s, const Limits& cap, std::string_view key, const toml::node& v,
                         const std::string& at) {
  if (key == "name") {
    auto n = get_string(v, at);
    if (!n) return n.error();
    s.name = *n;
  } else if (key == "nics") {
    auto l = get_list<std::string>(v, at, get_string);
    if (!l) return l.error();
    s.nics = *l;
  } else if (key == "vnis") {
    auto l = get_list<uint32_t>(v, at,
                                [](const toml::node& n, const std::string& w) { return get_count(n, w, UINT16_MAX); });
    if (!l) return l.error();
    if (l->size() > kMaxVnis) return invalid(fmt::format("{}: at most {} VNIs per service", at, kMaxVnis));
    s.desc.vnis.assign(l->begin(), l->end());
  } else if (key == "members") {
    auto l = get_list<uint32_t>(v, at,
                                [](const toml::node& n, const std::string& w) { return get_count(n, w, UINT32_MAX); });
    if (!l) return l.error();
    if (l->size() > kMaxMembers) return invalid(fmt::format("{}: at most {} members per service", at, kMaxMembers));
    s.desc.member_uids = *l;
  } else if (key == "tcs") {
    auto l = get_list<uint32_t>(v, at, [](const toml::node& n, const std::string& w) -> Result<uint32_t> {
      auto name = get_string(n, w);
      if (!name) return name.error();
      auto tc = parse_tc(*name);
      if (!tc) return invalid(fmt::format("{}: {}", w, tc.message()));
      return *tc;
    });
    if (!l) return l.error();
    for (uint32_t tc : *l) s.desc.tcs |= tc;
  } else if (key == "limits") {
    auto t = get_table(v, at);
    if (!t) return t.error();
    return apply_limits(s.desc, **t, cap, at);
  } else {
    return invalid(fmt::format("{}: unknown key (name, nics, vnis, members, tcs, limits)", at));
  }
  return {};
}

Result<SimSystemService> parse_service(const toml::node& n, const Limits& cap, const std::string& where) {
  auto t = get_table(n, where);
  if (!t) return t.error();
  SimSystemService s;
  s.desc.system = true;
  for (const auto& [k, v] : **t)
    if (auto st = apply_service_key(s, cap, k.str(), v, where + "." + std::string(k.str())); !st) return st.error();
  if (s.name.empty()) s.name = where;
  return s;
}

Result<FaultKind> parse_kind(const toml::node& n, const std::string& at) {
  auto s = get_string(n, at);
  if (!s) return s.error();
  if (*s == "busy") return FaultKind::busy;
  if (*s == "alloc-fail") return FaultKind::alloc_fail;
  if (*s == "missing-nic") return FaultKind::missing_nic;
  return invalid(fmt::format("{}: unknown fault '{}' (busy, alloc-fail, missing-nic)", at, *s));
}

Status apply_fault_key(SimFault& f, std::string_view key, const toml::node& v, const std::string& at) {
  if (key == "kind") {
    auto k = parse_kind(v, at);
    if (!k) return k.error();
    f.kind = *k;
  } else if (key == "nodes") {
    auto s = get_string(v, at);
    if (!s) return s.error();
    auto hl = Hostlist::parse(*s);
    if (!hl) return invalid(fmt::format("{}: {}", at, hl.message()));
    f.nodes = *hl;
  } else if (key == "nic") {
    auto s = get_string(v, at);
    if (!s) return s.error();
    f.nic = *s;
  } else if (key == "seconds") {
    auto d = v.value<double>();
    if (!d || *d < 0) return invalid(fmt::format("{}: expected a number of seconds, 0 or more", at));
    f.seconds = *d;
  } else if (key == "message") {
    auto s = get_string(v, at);
    if (!s) return s.error();
    f.message = *s;
  } else {
    return invalid(fmt::format("{}: unknown key (kind, nodes, nic, seconds, message)", at));
  }
  return {};
}

Result<SimFault> parse_fault(const toml::node& n, const std::string& where) {
  auto t = get_table(n, where);
  if (!t) return t.error();
  if (!(*t)->contains("kind"))
    return invalid(fmt::format("{}: 'kind' is missing (busy, alloc-fail, missing-nic)", where));
  SimFault f;
  for (const auto& [k, v] : **t)
    if (auto st = apply_fault_key(f, k.str(), v, where + "." + std::string(k.str())); !st) return st.error();
  if (f.kind == FaultKind::missing_nic && f.nic.empty())
    return invalid(fmt::format("{}: a missing-nic fault needs 'nic' (e.g. \"cxi1\")", where));
  if (f.kind == FaultKind::alloc_fail && f.message.empty()) f.message = "simulated allocation failure";
  return f;
}

SimSystemService default_service() {
  SimSystemService s;
  s.name = "default";
  s.desc.system = true;
  s.desc.vnis = {1, 10};
  return s;
}

Result<SimConfig> build(const toml::table& root, const std::string& src) {
  SimConfig c;
  c.capacity = cassini_capacity();
  bool default_svc = true;
  // Capacity first: services' limits default their max to it.
  if (const auto* cap = root.get("capacity")) {
    auto t = get_table(*cap, src + ": capacity");
    if (!t) return t.error();
    if (auto st = apply_capacity(c.capacity, **t, src + ": capacity"); !st) return st.error();
  }
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    const std::string at = src + ": " + key;
    if (key == "capacity") continue;
    if (key == "nics") {
      auto n = get_count(v, at, kMaxNics);
      if (!n) return n.error();
      c.nics = *n;
    } else if (key == "default-service") {
      auto b = v.value<bool>();
      if (!b) return invalid(at + ": expected true or false");
      default_svc = *b;
    } else if (key == "system-service") {
      auto l = get_list<SimSystemService>(
          v, at, [&](const toml::node& n, const std::string& w) { return parse_service(n, c.capacity, w); });
      if (!l) return l.error();
      c.system_services = *l;
    } else if (key == "fault") {
      auto l = get_list<SimFault>(v, at, parse_fault);
      if (!l) return l.error();
      c.faults = *l;
    } else {
      return invalid(at + ": unknown key (nics, default-service, capacity, system-service, fault)");
    }
  }
  if (default_svc) c.system_services.insert(c.system_services.begin(), default_service());
  return c;
}

}  // namespace

bool SimFault::applies(std::string_view node, std::string_view nic_name) const {
  return (nodes.empty() || nodes.contains(node)) && (nic.empty() || nic == nic_name);
}

Limits cassini_capacity() {
  Limits c{};
  c[idx(Rsrc::PTE)].max = 2048;  // C_NUM_PTLTES
  c[idx(Rsrc::TXQ)].max = 1024;  // C_NUM_TRANSMIT_CQS
  c[idx(Rsrc::TGQ)].max = 512;   // C_NUM_TARGET_CQS
  c[idx(Rsrc::EQ)].max = 2047;   // C_NUM_EQS less EQ 0, which is invalid
  c[idx(Rsrc::CT)].max = 2047;   // C_NUM_CTS less CT 0
  c[idx(Rsrc::LE)].max = 16384;  // list entries per processing engine
  c[idx(Rsrc::TLE)].max = 2048;  // C_NUM_TLES
  c[idx(Rsrc::AC)].max = 1022;   // 1024 less AC 0 and the shared physical-mapping AC
  return c;
}

SimConfig default_sim_config() {
  SimConfig c;
  c.capacity = cassini_capacity();
  c.system_services.push_back(default_service());
  return c;
}

Result<SimConfig> parse_sim_config(std::string_view toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    return invalid(
        fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, e.description()));
  }
  return build(root, source);
}

Result<SimConfig> load_sim_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid("simulated NIC configuration '" + path + "': cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return invalid("simulated NIC configuration '" + path + "': read error");
  return parse_sim_config(text.str(), path);
}

}  // namespace corral::fabric::slingshot
