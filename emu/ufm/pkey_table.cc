#include "pkey_table.h"

#include <cctype>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

namespace corral::emu::ufm {

using nlohmann::json;

namespace {

constexpr size_t kMaxGuidsPerCall = 65536;
constexpr size_t kMaxPkeys = 32767;

Reply error(int status, std::string message) { return Reply{status, json{{"error", std::move(message)}}}; }

std::string key_text(uint16_t k) { return fmt::format("{:#x}", k); }

// The request's "pkey", or the refusal of a request that has none UFM takes.
std::optional<Reply> key_of(const json& req, uint16_t& key) {
  if (!req.is_object()) return error(400, "the request body is not a JSON object");
  auto k = parse_ufm_pkey(req.value("pkey", json()));
  if (!k) return error(400, "pkey: want a hexadecimal string between \"0x0\" and \"0x7fff\" (exclusive)");
  key = *k;
  return std::nullopt;
}

}  // namespace

std::optional<uint16_t> parse_ufm_pkey(const json& v) {
  if (!v.is_string()) return std::nullopt;
  std::string s = v.get<std::string>();
  if (s.size() < 3 || s.size() > 6 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return std::nullopt;
  for (size_t i = 2; i < s.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
  const unsigned long value = std::strtoul(s.c_str() + 2, nullptr, 16);
  if (value == 0 || value >= 0x7fff) return std::nullopt;
  return static_cast<uint16_t>(value);
}

std::optional<std::string> parse_ufm_guid(const json& v) {
  if (!v.is_string()) return std::nullopt;
  std::string s = v.get<std::string>();
  if (s.size() < 16 || s.size() > 20) return std::nullopt;
  if (s.starts_with("0x") || s.starts_with("0X")) s = s.substr(2);
  std::string out;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  while (out.size() > 16 && out.front() == '0') out.erase(0, 1);
  if (out.size() > 16) return std::nullopt;
  return std::string(16 - out.size(), '0') + out;
}

json PkeyTable::view(uint16_t, const Pkey& p, bool guids_data) const {
  json v{{"partition", p.name}, {"ip_over_ib", p.ip_over_ib}};
  if (guids_data) {
    v["guids"] = json::array();
    for (const auto& [g, m] : p.guids)
      v["guids"].push_back({{"guid", g}, {"membership", m.membership}, {"index0", m.index0}});
  }
  return v;
}

Reply PkeyTable::create(const json& req) {
  uint16_t key = 0;
  if (auto bad = key_of(req, key)) return *bad;
  std::lock_guard lock(mu_);
  if (!pkeys_.contains(key) && pkeys_.size() >= kMaxPkeys) return error(400, "no more partition keys");
  Pkey& p = pkeys_[key];
  if (req.contains("partition_name") && req["partition_name"].is_string()) p.name = req["partition_name"];
  if (req.contains("ip_over_ib") && req["ip_over_ib"].is_boolean()) p.ip_over_ib = req["ip_over_ib"];
  return Reply{};
}

Reply PkeyTable::add_guids(const json& req) {
  uint16_t key = 0;
  if (auto bad = key_of(req, key)) return *bad;
  const json& guids = req.value("guids", json());
  if (!guids.is_array() || guids.empty()) return error(400, "guids: want a list of port GUIDs");
  if (guids.size() > kMaxGuidsPerCall) return error(400, "guids: too many in one request");
  const std::string membership = req.value("membership", std::string("full"));
  if (membership != "full" && membership != "limited") return error(400, "membership: want \"full\" or \"limited\"");
  const json& index0 = req.value("index0", json(false));
  if (!index0.is_boolean()) return error(400, "index0: want true or false");
  std::map<std::string, Member> add;
  for (const auto& g : guids) {
    auto guid = parse_ufm_guid(g);
    if (!guid) return error(400, fmt::format("guids: {} is not a GUID (16 to 20 hexadecimal characters)", g.dump()));
    add[*guid] = Member{membership, index0.get<bool>()};
  }
  std::lock_guard lock(mu_);
  if (!pkeys_.contains(key) && pkeys_.size() >= kMaxPkeys) return error(400, "no more partition keys");
  Pkey& p = pkeys_[key];
  if (req.contains("ip_over_ib") && req["ip_over_ib"].is_boolean()) p.ip_over_ib = req["ip_over_ib"];
  for (auto& [g, m] : add) p.guids[g] = m;
  return Reply{};
}

Reply PkeyTable::remove_guids(const json& req) {
  uint16_t key = 0;
  if (auto bad = key_of(req, key)) return *bad;
  const json& guids = req.value("guids", json());
  if (!guids.is_array()) return error(400, "guids: want a list of port GUIDs");
  std::lock_guard lock(mu_);
  auto it = pkeys_.find(key);
  if (it == pkeys_.end()) return error(404, fmt::format("PKey {} does not exist", key_text(key)));
  for (const auto& g : guids)
    if (auto guid = parse_ufm_guid(g)) it->second.guids.erase(*guid);
  return Reply{};
}

Reply PkeyTable::remove(const std::string& text) {
  auto key = parse_ufm_pkey(json(text));
  if (!key) return error(400, fmt::format("'{}' is not a partition key", text));
  std::lock_guard lock(mu_);
  if (pkeys_.erase(*key) == 0) return error(404, fmt::format("PKey {} does not exist", key_text(*key)));
  return Reply{};
}

Reply PkeyTable::get(const std::string& text, bool guids_data) const {
  std::lock_guard lock(mu_);
  Reply r;
  if (text.empty()) {
    for (const auto& [k, p] : pkeys_) r.body[key_text(k)] = view(k, p, guids_data);
    return r;
  }
  auto key = parse_ufm_pkey(json(text));
  if (!key) return error(400, fmt::format("'{}' is not a partition key", text));
  if (auto it = pkeys_.find(*key); it != pkeys_.end()) r.body = view(*key, it->second, guids_data);
  return r;
}

size_t PkeyTable::size() const {
  std::lock_guard lock(mu_);
  return pkeys_.size();
}

}  // namespace corral::emu::ufm
