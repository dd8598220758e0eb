// Cluster-key credentials: what MUNGE vouches for (uid, gid, origin host, time to live, one
// use), made with corral's cluster key for sites that run no munged. Only a holder of the
// key makes or reads one: corrald and the node agents (which run as root and read the key
// file), and corral-authd, which signs for the local users who ask it over its Unix socket
// (their uid comes from the kernel; they never see the key).
//
// A credential is "corral1." and the base64url of: the fields below, the payload encrypted
// (AES-256-CTR, the nonce as counter block) so that a secret sent to one uid stays secret on
// an unencrypted connection, and an HMAC-SHA256 over all of it. Encryption and MAC use two
// keys derived from the cluster key, so neither is the job-key derivation's key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::net {

inline constexpr std::string_view kClusterCredPrefix = "corral1.";
inline constexpr uint32_t kClusterCredTtl = 60;       // seconds: used at once, and the replay cache stays small
inline constexpr int64_t kClusterCredClockSkew = 60;  // a credential "from the future" is taken this far
inline constexpr size_t kClusterCredNonceBytes = 16;
inline constexpr size_t kMaxClusterCredPayload = 1024;

struct ClusterCred {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::optional<uint32_t> restrict_uid;  // only a process of this uid may read it
  std::string origin;                    // IPv4 address of the signing host ("" if unknown)
  int64_t issued = 0;                    // Unix seconds
  uint32_t ttl = kClusterCredTtl;
  std::string nonce;  // kClusterCredNonceBytes random bytes: the replay key
  std::string payload;
};

// The clock credentials are issued and checked by: Unix seconds.
int64_t cluster_cred_now();

// Fills in a fresh nonce and issue time (`now`) and signs.
Result<std::string> seal_cluster_cred(std::string_view cluster_key, ClusterCred cred, int64_t now);

// Checks the MAC and the time window at `now` (expired, or issued too far ahead, is refused
// with Errc::permission_denied); replays and the uid restriction are the caller's to check.
Result<ClusterCred> open_cluster_cred(std::string_view cluster_key, std::string_view text, int64_t now);

}  // namespace corral::net
