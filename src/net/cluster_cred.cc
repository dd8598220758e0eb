#include "net/cluster_cred.h"

#include <arpa/inet.h>
#include <openssl/evp.h>

#include <array>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "job/hmac_key.h"
#include "net/big_endian.h"

namespace corral::net {

namespace {

constexpr uint8_t kVersion = 1;
constexpr uint8_t kRestricted = 1;
constexpr size_t kMacBytes = 32;
// version, flags, uid, gid, restrict_uid, origin, issued, ttl, nonce, payload length
constexpr size_t kHeaderBytes = 1 + 1 + 4 + 4 + 4 + 4 + 8 + 4 + kClusterCredNonceBytes + 2;
constexpr size_t kMaxCredText = 2048;  // base64 of the largest payload, with room

// Two keys from the cluster key, each for one use.
std::string mac_key(std::string_view cluster_key) { return job::hmac_sha256(cluster_key, "corral-cred-mac-v1"); }
std::string enc_key(std::string_view cluster_key) { return job::hmac_sha256(cluster_key, "corral-cred-enc-v1"); }

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

// AES-256-CTR is its own inverse; nullopt on failure (out of memory).
std::optional<std::string> ctr(std::string_view key, std::string_view iv, std::string_view in) {
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  if (!ctx || key.size() != 32 || iv.size() != 16) return std::nullopt;
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_ctr(), nullptr, reinterpret_cast<const unsigned char*>(key.data()),
                         reinterpret_cast<const unsigned char*>(iv.data())) != 1)
    return std::nullopt;
  std::string out(in.size(), '\0');
  int n = 0;
  if (!in.empty() &&
      EVP_EncryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &n,
                        reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size())) != 1)
    return std::nullopt;
  return out;
}

// Reads the next field and moves past it.
uint64_t next(std::string_view in, size_t& at, int bytes) {
  const uint64_t v = get_be(in, at, bytes);
  at += static_cast<size_t>(bytes);
  return v;
}

std::string origin_bytes(const std::string& origin) {
  std::array<unsigned char, 4> a{};
  if (origin.empty() || ::inet_pton(AF_INET, origin.c_str(), a.data()) != 1) a = {};
  return std::string(a.begin(), a.end());
}

std::string origin_text(std::string_view b) {
  if (b == std::string_view("\0\0\0\0", 4)) return {};
  char dotted[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, b.data(), dotted, sizeof dotted);
  return dotted;
}

Error refused(std::string_view why) { return denied(fmt::format("cluster-key credential refused: {}", why)); }

}  // namespace

int64_t cluster_cred_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<std::string> seal_cluster_cred(std::string_view cluster_key, ClusterCred c, int64_t now) {
  if (c.payload.size() > kMaxClusterCredPayload) return invalid("a credential's payload is at most 1024 bytes");
  auto nonce = job::random_bytes(kClusterCredNonceBytes);
  if (!nonce) return nonce.error();
  c.nonce = std::move(*nonce);
  c.issued = now;
  std::string body;
  body.reserve(kHeaderBytes + c.payload.size() + kMacBytes);
  put_be(body, kVersion, 1);
  put_be(body, c.restrict_uid ? kRestricted : 0, 1);
  put_be(body, c.uid, 4);
  put_be(body, c.gid, 4);
  put_be(body, c.restrict_uid.value_or(0), 4);
  body += origin_bytes(c.origin);
  put_be(body, static_cast<uint64_t>(c.issued), 8);
  put_be(body, c.ttl, 4);
  body += c.nonce;
  put_be(body, c.payload.size(), 2);
  auto sealed = ctr(enc_key(cluster_key), c.nonce, c.payload);
  if (!sealed) return Error{Errc::internal, "cannot encrypt a credential (OpenSSL)"};
  body += *sealed;
  body += job::hmac_sha256(mac_key(cluster_key), body);
  return std::string(kClusterCredPrefix) + job::base64url_encode(body);
}

Result<ClusterCred> open_cluster_cred(std::string_view cluster_key, std::string_view text, int64_t now) {
  if (text.size() > kMaxCredText) return refused("too long");
  if (text.substr(0, kClusterCredPrefix.size()) != kClusterCredPrefix) return refused("not a cluster-key credential");
  auto body = job::base64url_decode(text.substr(kClusterCredPrefix.size()));
  if (!body || body->size() < kHeaderBytes + kMacBytes) return refused("malformed");
  const std::string_view signed_part = std::string_view(*body).substr(0, body->size() - kMacBytes);
  // Nothing is read before the MAC matches: a forger learns nothing from our answers.
  if (!job::equal_macs(job::hmac_sha256(mac_key(cluster_key), signed_part),
                       std::string_view(*body).substr(signed_part.size())))
    return refused("bad signature (made with another cluster key, or altered)");
  size_t at = 0;
  ClusterCred c;
  if (next(*body, at, 1) != kVersion) return refused("unknown version");
  const uint64_t flags = next(*body, at, 1);
  c.uid = static_cast<uint32_t>(next(*body, at, 4));
  c.gid = static_cast<uint32_t>(next(*body, at, 4));
  const auto restrict_uid = static_cast<uint32_t>(next(*body, at, 4));
  if ((flags & kRestricted) != 0) c.restrict_uid = restrict_uid;
  c.origin = origin_text(std::string_view(*body).substr(at, 4));
  at += 4;
  c.issued = static_cast<int64_t>(next(*body, at, 8));
  c.ttl = static_cast<uint32_t>(next(*body, at, 4));
  c.nonce = body->substr(at, kClusterCredNonceBytes);
  at += kClusterCredNonceBytes;
  const size_t len = next(*body, at, 2);
  if (at + len != signed_part.size()) return refused("malformed");
  auto payload = ctr(enc_key(cluster_key), c.nonce, signed_part.substr(at));
  if (!payload) return Error{Errc::internal, "cannot decrypt a credential (OpenSSL)"};
  c.payload = std::move(*payload);
  if (c.issued > now + kClusterCredClockSkew)
    return refused(fmt::format("issued {} s in the future (are the hosts' clocks in step?)", c.issued - now));
  if (now > c.issued + static_cast<int64_t>(c.ttl))
    return refused(fmt::format("expired {} s ago", now - c.issued - static_cast<int64_t>(c.ttl)));
  return c;
}

}  // namespace corral::net
