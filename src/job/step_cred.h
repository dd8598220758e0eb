// Step credentials: what the controller (or a job's step manager) hands a launcher so a
// node agent can check, without asking anyone, that a step may run as a user on its cores.
//
// Token: base64url(payload) "." base64url(HMAC-SHA256(key, context || base64url(payload))).
// The MAC covers the exact transmitted text, so no canonical re-serialisation is needed.
//
// Keys: each job gets derive_job_key(cluster_key, jobid), so its step manager can sign only
// that job's steps, while a node agent holding the cluster key checks any job's credentials
// with verify_step_cred_with_cluster_key(). A controller that signs itself uses the derived
// key too, so there is one rule for node agents.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "util/idset.h"
#include "util/result.h"

namespace corral::job {

struct StepCred {
  uint64_t jobid = 0;
  uint32_t stepid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string nodes;                                // hostlist, e.g. "n[1-4]"
  std::map<std::string, IdSet, std::less<>> cores;  // node -> cores the step may use there
  double issued = 0;                                // seconds since the epoch
  double expires = 0;
  uint64_t nonce = 0;  // random (random_nonce()), so equal requests give distinct tokens
  // SHA-256 (hex) of what the launch runs: command, environment, working directory and
  // files (node::launch_digest). A captured credential cannot run anything else.
  std::string launch_digest;

  IdSet cores_on(std::string_view node) const;  // empty when none were granted there
  bool operator==(const StepCred&) const = default;
};

struct VerifyPolicy {
  double now = 0;                            // seconds since the epoch, on the checking node's clock
  uint32_t uid = 0;                          // the uid the launch request runs as
  std::string node;                          // the node doing the check; empty: not checked here
  double clock_skew = 5.0;                   // seconds of disagreement between clocks that is tolerated
  std::optional<uint64_t> jobid;             // when set, the credential must be for this job
  std::optional<uint32_t> stepid;            // when set, the credential must be for this step
  std::optional<std::string> launch_digest;  // when set, the credential must cover it
};

// The key must not be empty (verification refuses an empty key).
std::string sign_step_cred(const StepCred& cred, std::string_view key);

// Malformed tokens are invalid_argument ("malformed step credential: ..."); a bad signature,
// expiry, another user, job, step or node are permission_denied naming the failed check.
Result<StepCred> verify_step_cred(std::string_view token, std::string_view key, const VerifyPolicy& policy);

// Derives the job key from the job id the (still unauthenticated) token claims; a changed
// job id changes the key, so the signature check still catches it.
Result<StepCred> verify_step_cred_with_cluster_key(std::string_view token, std::string_view cluster_key,
                                                   const VerifyPolicy& policy);

// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

// HMAC-SHA256(cluster_key, context || decimal jobid): 32 raw bytes.
std::string derive_job_key(std::string_view cluster_key, uint64_t jobid);

}  // namespace corral::job
