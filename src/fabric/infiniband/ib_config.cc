#include "fabric/infiniband/ib_config.h"

#include <cctype>
#include <set>

#include <fmt/format.h>

#include "fabric/infiniband/parse_unsigned.h"
#include "util/idset.h"

namespace corral::fabric::infiniband {
namespace {

constexpr uint64_t kMaxGuids = uint64_t{1} << 20;

Status apply_plain(IbConfig& c, const hook::Setting& s) {
  if (s.key == "enabled") return hook::read_bool(s, c.enabled);
  if (s.key == "default-fabric") return hook::read_string(s, c.default_fabric);
  if (s.key == "pkey-pool") {
    if (auto st = hook::read_string(s, c.pkey_pool); !st) return st;
    if (auto set = pkey_range_idset(c.pkey_pool); !set) return invalid(fmt::format("{}: {}", s.where, set.message()));
    return {};
  }
  if (s.key == "guid-pool") {
    std::string text;
    if (auto st = hook::read_string(s, text); !st) return st;
    if (auto st = parse_guid_range(text, c.guid_first, c.guid_count); !st)
      return invalid(fmt::format("{}: {}", s.where, st.message()));
    return {};
  }
  if (s.key == "subnet-manager") {
    if (auto st = hook::read_string(s, c.subnet_manager); !st) return st;
    if (c.subnet_manager != "ufm" && c.subnet_manager != "opensm" && c.subnet_manager != "none")
      return invalid(fmt::format("{}: '{}' is not ufm, opensm or none", s.where, c.subnet_manager));
    return {};
  }
  if (s.key == "ufm-url") return hook::read_string(s, c.ufm_url);
  if (s.key == "ufm-credentials") return hook::read_string(s, c.ufm_credentials);
  if (s.key == "ufm-ca") return hook::read_string(s, c.ufm_ca);
  if (s.key == "opensm-partitions") return hook::read_string(s, c.opensm_partitions);
  if (s.key == "opensm-reload") return hook::read_string(s, c.opensm_reload);
  if (s.key == "opensm-base") return hook::read_string(s, c.opensm_base);
  if (s.key == "command") return hook::read_string(s, c.command);
  if (s.key == "prolog-timeout") return hook::read_duration(s, c.prolog_timeout);
  return hook::unknown_key(s);
}

Status apply_table(IbConfig& c, const hook::TableKey& t, const hook::Setting& s) {
  if (t.array == "fabric") {
    if (c.fabrics.size() <= t.index) c.fabrics.resize(t.index + 1);
    auto& f = c.fabrics[t.index];
    if (t.field == "name") return hook::read_string(s, f.name);
    if (t.field == "subnet-prefix") return hook::read_string(s, f.subnet_prefix);
    return hook::unknown_key(s);
  }
  if (t.array == "partition") {
    if (c.partitions.size() <= t.index) c.partitions.resize(t.index + 1);
    auto& p = c.partitions[t.index];
    if (t.field == "name") return hook::read_string(s, p.name);
    if (t.field == "pkey") {
      std::string text;
      if (auto st = hook::read_string(s, text); !st) return st;
      auto key = parse_pkey(text);
      if (!key) return invalid(fmt::format("{}: {}", s.where, key.message()));
      p.pkey = *key;
      return {};
    }
    return hook::unknown_key(s);
  }
  return hook::unknown_key(s);
}

Status check_partitions(const IbConfig& c) {
  std::set<std::string> names;
  std::set<uint16_t> keys;
  for (size_t i = 0; i < c.partitions.size(); ++i) {
    const auto& p = c.partitions[i];
    const std::string where = fmt::format("infiniband.partition[{}]", i);
    if (!valid_name(p.name) || p.name == "job" || p.name == "default")
      return invalid(where + ": needs a name of 1-64 letters, digits, '-', '_' or '.' other than 'job' and 'default'");
    if (p.pkey == 0) return invalid(where + ": needs a pkey such as \"0x0100\"");
    if (!names.insert(p.name).second) return invalid(fmt::format("{}: partition '{}' is named twice", where, p.name));
    if (!keys.insert(p.pkey).second) return invalid(fmt::format("{}: pkey {:#06x} is used twice", where, p.pkey));
  }
  if (c.pkey_pool.empty()) return {};
  auto set = pkey_range_idset(c.pkey_pool);
  auto pool = IdSet::parse(*set);
  for (uint16_t k : keys)
    if (pool && pool->contains(k))
      return invalid(fmt::format("infiniband.pkey-pool: holds {:#06x}, a named partition's key", k));
  return {};
}

}  // namespace

Result<uint16_t> parse_pkey(std::string_view text) {
  auto v = parse_unsigned(text, 16, 0xffff);
  if (!v) return invalid(fmt::format("'{}' is not a partition key (hex, such as 0x0100)", text));
  const auto key = static_cast<uint16_t>(*v & 0x7fff);
  if (key == 0 || key == kDefaultPkey)
    return invalid(fmt::format("'{}': keys 0x0000 and 0x7fff (the default partition) cannot be used", text));
  return key;
}

Result<std::string> pkey_range_idset(std::string_view text) {
  const size_t dash = text.find('-');
  auto lo = parse_pkey(text.substr(0, dash));
  if (!lo) return lo.error();
  auto hi = dash == std::string_view::npos ? lo : parse_pkey(text.substr(dash + 1));
  if (!hi) return hi.error();
  if (*hi < *lo) return invalid(fmt::format("'{}': the range ends before it starts", text));
  return fmt::format("{}-{}", *lo, *hi);
}

Status parse_guid_range(std::string_view text, uint64_t& first, uint64_t& count) {
  const size_t dash = text.find('-');
  const uint64_t lo = parse_unsigned(text.substr(0, dash), 16).value_or(0);
  const uint64_t hi = dash == std::string_view::npos ? 0 : parse_unsigned(text.substr(dash + 1), 16).value_or(0);
  if (lo == 0 || hi < lo)
    return invalid(fmt::format(
        "'{}' is not a GUID range (FIRST-LAST in hex, such as 0x0002c90300a00000-0x0002c90300afffff)", text));
  if (hi - lo >= kMaxGuids) return invalid(fmt::format("'{}': at most {} GUIDs", text, kMaxGuids));
  first = lo;
  count = hi - lo + 1;
  return {};
}

std::string guid_hex(uint64_t guid) { return fmt::format("{:016x}", guid); }

std::string plain_guid(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c != ':') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<IbConfig> parse_ib_settings(const hook::Settings& settings) {
  IbConfig c;
  for (const auto& s : settings) {
    auto t = hook::table_key(s.key);
    if (auto st = t ? apply_table(c, *t, s) : apply_plain(c, s); !st) return st.error();
  }
  if (auto f = Fabrics::create(c.fabrics, c.default_fabric); !f) return invalid("infiniband.fabric: " + f.message());
  if (auto st = check_partitions(c); !st) return st.error();
  if (c.subnet_manager == "ufm" && (c.ufm_url.empty() || c.ufm_credentials.empty()))
    return invalid("infiniband: subnet-manager = \"ufm\" needs ufm-url and ufm-credentials");
  if (c.subnet_manager == "opensm" && c.opensm_partitions.empty())
    return invalid("infiniband: subnet-manager = \"opensm\" needs opensm-partitions (the partitions.conf to write)");
  return c;
}

}  // namespace corral::fabric::infiniband
