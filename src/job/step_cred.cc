#include "job/step_cred.h"

#include <fmt/format.h>

#include <openssl/sha.h>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "job/hmac_key.h"
#include "util/hostlist.h"

namespace corral::job {
namespace {

using json = nlohmann::json;

constexpr int kVersion = 1;
// Context strings keep a MAC made for one purpose from being accepted for another, even
// when the same key signs both.
constexpr std::string_view kMacContext = "corral step credential v1\n";
constexpr std::string_view kJobKeyContext = "corral job key v1\n";
constexpr size_t kMacBytes = 32;
constexpr size_t kMaxTokenBytes = 1 << 20;  // bounds work on hostile input

Error malformed(std::string_view what) { return invalid(fmt::format("malformed step credential: {}", what)); }

std::string mac_of(std::string_view key, std::string_view payload_b64) {
  std::string msg(kMacContext);
  msg += payload_b64;
  return hmac_sha256(key, msg);
}

// Nodes sharing a core set are written once as a hostlist: ["n[1-64]","0-31"].
json cores_to_json(const StepCred& c) {
  std::map<std::string, std::vector<std::string>> by_set;
  for (const auto& [node, set] : c.cores) by_set[set.encode()].push_back(node);
  json out = json::array();
  for (auto& [set, nodes] : by_set) {
    out.push_back(json::array({Hostlist(std::move(nodes)).sorted().encode(), set}));
  }
  return out;
}

std::string payload_of(const StepCred& c) {
  json j;
  j["v"] = kVersion;
  j["job"] = c.jobid;
  j["step"] = c.stepid;
  j["uid"] = c.uid;
  j["gid"] = c.gid;
  j["nodes"] = c.nodes;
  j["cores"] = cores_to_json(c);
  j["iat"] = c.issued;
  j["exp"] = c.expires;
  j["nonce"] = c.nonce;
  j["dig"] = c.launch_digest;
  return j.dump();
}

// Reads typed fields, keeping the first problem so callers check once at the end.
class FieldReader {
 public:
  explicit FieldReader(const json& j) : j_(j) {}

  uint64_t uint(const char* name, uint64_t max) {
    const json* v = find(name);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned() || v->get<uint64_t>() > max) {
      fail(fmt::format("field '{}' must be an integer from 0 to {}", name, max));
      return 0;
    }
    return v->get<uint64_t>();
  }
  double number(const char* name) {
    const json* v = find(name);
    if (v != nullptr && v->is_number()) return v->get<double>();
    if (v != nullptr) fail(fmt::format("field '{}' must be a number", name));
    return 0;
  }
  std::string string(const char* name) {
    const json* v = find(name);
    if (v != nullptr && v->is_string()) return v->get<std::string>();
    if (v != nullptr) fail(fmt::format("field '{}' must be a string", name));
    return {};
  }
  const json* array(const char* name) {
    const json* v = find(name);
    if (v != nullptr && v->is_array()) return v;
    if (v != nullptr) fail(fmt::format("field '{}' must be an array", name));
    return nullptr;
  }
  const std::optional<std::string>& problem() const { return problem_; }

 private:
  const json* find(const char* name) {
    auto it = j_.find(name);
    if (it != j_.end()) return &*it;
    fail(fmt::format("field '{}' is missing", name));
    return nullptr;
  }
  void fail(std::string msg) {
    if (!problem_) problem_ = std::move(msg);
  }

  const json& j_;
  std::optional<std::string> problem_;
};

Status parse_cores_entry(const json& e, const Hostlist& nodes, StepCred& c) {
  if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
    return malformed("each 'cores' entry must be [hostlist, idset]");
  }
  auto hosts = Hostlist::parse(e[0].get<std::string>());
  if (!hosts) return malformed("cores: " + hosts.message());
  auto set = IdSet::parse(e[1].get<std::string>());
  if (!set) return malformed("cores: " + set.message());
  for (const auto& h : hosts->hosts()) {
    if (!nodes.contains(h)) {
      return malformed(fmt::format("cores are given for node {}, which is not in nodes {}", h, nodes.encode()));
    }
    if (!c.cores.emplace(h, *set).second) {
      return malformed(fmt::format("cores are given twice for node {}", h));
    }
  }
  return {};
}

// Checks that the signer produced a coherent credential, beyond JSON types.
Status check_consistency(const json& cores, StepCred& c) {
  auto nodes = Hostlist::parse(c.nodes);
  if (!nodes) return malformed("nodes: " + nodes.message());
  for (const auto& e : cores) {
    if (auto s = parse_cores_entry(e, *nodes, c); !s) return s;
  }
  if (c.expires < c.issued) return malformed("it expires before it was issued");
  return {};
}

Result<StepCred> parse_payload(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return malformed("payload is not a JSON object");
  FieldReader r(j);
  uint64_t version = r.uint("v", std::numeric_limits<uint32_t>::max());
  if (!r.problem() && version != kVersion) {
    return malformed(fmt::format("version {} is not supported (this corral reads {})", version, kVersion));
  }
  StepCred c;
  c.jobid = r.uint("job", std::numeric_limits<uint64_t>::max());
  c.stepid = static_cast<uint32_t>(r.uint("step", std::numeric_limits<uint32_t>::max()));
  c.uid = static_cast<uint32_t>(r.uint("uid", std::numeric_limits<uint32_t>::max()));
  c.gid = static_cast<uint32_t>(r.uint("gid", std::numeric_limits<uint32_t>::max()));
  c.nodes = r.string("nodes");
  const json* cores = r.array("cores");
  c.issued = r.number("iat");
  c.expires = r.number("exp");
  c.nonce = r.uint("nonce", std::numeric_limits<uint64_t>::max());
  c.launch_digest = r.string("dig");
  if (r.problem()) return malformed(*r.problem());
  if (auto s = check_consistency(*cores, c); !s) return s.error();
  return c;
}

struct Token {
  std::string_view payload_b64;
  std::string payload;
  std::string mac;
};

Result<Token> split_token(std::string_view token) {
  if (token.empty()) return malformed("the token is empty");
  if (token.size() > kMaxTokenBytes) {
    return malformed(fmt::format("the token is {} bytes, more than the {} allowed", token.size(), kMaxTokenBytes));
  }
  auto dot = token.find('.');
  if (dot == std::string_view::npos) return malformed("expected <payload>.<signature>, no '.' found");
  if (token.find('.', dot + 1) != std::string_view::npos) return malformed("more than one '.'");
  Token t;
  t.payload_b64 = token.substr(0, dot);
  if (t.payload_b64.empty()) return malformed("the payload is empty");
  auto payload = base64url_decode(t.payload_b64);
  if (!payload) return malformed("payload: " + payload.message());
  auto mac = base64url_decode(token.substr(dot + 1));
  if (!mac) return malformed("signature: " + mac.message());
  if (mac->size() != kMacBytes) {
    return malformed(fmt::format("the signature is {} bytes, expected {}", mac->size(), kMacBytes));
  }
  t.payload = std::move(*payload);
  t.mac = std::move(*mac);
  return t;
}

std::string seconds_text(double s) {
  if (s >= 10) return fmt::format("{} s", std::llround(s));
  return fmt::format("{:.1f} s", s);
}

Status check_claims(const StepCred& c, const VerifyPolicy& p) {
  if (p.now > c.expires + p.clock_skew) {
    return denied(fmt::format("step credential expired {} ago", seconds_text(p.now - c.expires)));
  }
  if (c.issued > p.now + p.clock_skew) {
    return denied(
        fmt::format("step credential was issued {} in the future; check that the "
                    "clocks of its signer and node {} agree",
                    seconds_text(c.issued - p.now), p.node));
  }
  if (p.jobid && *p.jobid != c.jobid) {
    return denied(fmt::format("step credential is for job {}, not job {}", c.jobid, *p.jobid));
  }
  if (p.stepid && *p.stepid != c.stepid) {
    return denied(
        fmt::format("step credential is for step {}.{}, not step {}.{}", c.jobid, c.stepid, c.jobid, *p.stepid));
  }
  if (c.uid != p.uid) {
    return denied(fmt::format("step credential is for uid {}, not {}", c.uid, p.uid));
  }
  if (p.launch_digest && *p.launch_digest != c.launch_digest) {
    return denied(
        "step credential does not cover this launch: its command, environment, working "
        "directory or files differ from what the step manager signed");
  }
  if (p.node.empty()) return {};
  // Parsed when the payload was read, so this cannot fail here.
  auto nodes = Hostlist::parse(c.nodes);
  if (!nodes || !nodes->contains(p.node)) {
    return denied(fmt::format("step credential does not include node {} (it covers {})", p.node, c.nodes));
  }
  return {};
}

Result<StepCred> verify_parts(const Token& t, std::string_view key, const VerifyPolicy& p) {
  if (!equal_macs(mac_of(key, t.payload_b64), t.mac)) {
    return denied("step credential signature does not match (forged or altered)");
  }
  auto cred = parse_payload(t.payload);
  if (!cred) return cred.error();
  if (auto s = check_claims(*cred, p); !s) return s.error();
  return cred;
}

Status check_key(std::string_view key) {
  if (key.empty()) return invalid("cannot verify step credential: the signing key is empty");
  return {};
}

}  // namespace

IdSet StepCred::cores_on(std::string_view node) const {
  auto it = cores.find(node);
  return it == cores.end() ? IdSet() : it->second;
}

std::string sign_step_cred(const StepCred& cred, std::string_view key) {
  std::string payload_b64 = base64url_encode(payload_of(cred));
  std::string mac = base64url_encode(mac_of(key, payload_b64));
  return payload_b64 + "." + mac;
}

Result<StepCred> verify_step_cred(std::string_view token, std::string_view key, const VerifyPolicy& policy) {
  if (auto s = check_key(key); !s) return s.error();
  auto parts = split_token(token);
  if (!parts) return parts.error();
  return verify_parts(*parts, key, policy);
}

Result<StepCred> verify_step_cred_with_cluster_key(std::string_view token, std::string_view cluster_key,
                                                   const VerifyPolicy& policy) {
  if (auto s = check_key(cluster_key); !s) return s.error();
  auto parts = split_token(token);
  if (!parts) return parts.error();
  // The request names its job: the signature is checked before the payload is parsed.
  if (policy.jobid) return verify_parts(*parts, derive_job_key(cluster_key, *policy.jobid), policy);
  // Read only for the job id; nothing in it is trusted until the MAC matches.
  auto claimed = parse_payload(parts->payload);
  if (!claimed) return claimed.error();
  return verify_parts(*parts, derive_job_key(cluster_key, claimed->jobid), policy);
}

std::string derive_job_key(std::string_view cluster_key, uint64_t jobid) {
  std::string msg(kJobKeyContext);
  msg += std::to_string(jobid);
  return hmac_sha256(cluster_key, msg);
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof md);
  for (unsigned char b : md) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace corral::job
