// Who a request comes from when it crosses hosts, by the method the site chooses:
//   munge        munged on every host with the site's MUNGE key (net/munge_cred.h);
//   cluster-key  corral's cluster key (net/cluster_cred.h): corrald and the node agents
//                read it, and corral-authd on every host signs for its local users.
// Both give the same guarantees to the code that uses a Credentials: a uid and gid the
// sender cannot choose, the sending host's address, a time to live, one use, a payload
// bound to its purpose, and credentials only one uid may read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::net {

struct Identity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string origin;  // IPv4 address of the host that made the credential ("" if unknown)
};

enum class AuthMethod { munge, cluster_key };

// corral binds every credential to its purpose with a fixed payload, so that one made for
// something else (another user of the site's MUNGE, say) is never taken for a request.
// A request to corrald or a step service:
inline constexpr std::string_view kRequestPayload = "corral-request-v1";
// corrald's answer to an agent's stream: proof that the controller is a root process on the
// controller's host (a request credential is never taken for it).
inline constexpr std::string_view kControllerPayload = "corral-controller-v1";
// The gRPC metadata key a credential travels in.
inline constexpr std::string_view kCredentialMetadataKey = "x-corral-credential";

// corral-authd's socket when none is named.
inline constexpr std::string_view kDefaultAuthdSocket = "/run/corral-authd/authd.sock";

struct AuthConfig {
  AuthMethod method = AuthMethod::munge;
  std::string munge_socket;  // munge: "" is libmunge's default
  std::string key_file;      // cluster-key: a daemon signs and checks with the key itself
  std::string authd_socket;  // cluster-key without key_file: corral-authd signs ("" its default)
};

// "munge" or "cluster-key"; anything else is refused, naming both. (Inline: the
// configuration parsers use them without linking the methods.)
inline Result<AuthMethod> parse_auth_method(std::string_view text) {
  if (text == "munge") return AuthMethod::munge;
  if (text == "cluster-key") return AuthMethod::cluster_key;
  return invalid("the authentication method is \"munge\" or \"cluster-key\"");
}
inline std::string_view auth_method_name(AuthMethod method) {
  return method == AuthMethod::munge ? "munge" : "cluster-key";
}

// Thread-safe; one per process, so that replays are caught across all its servers.
class Credentials {
 public:
  virtual ~Credentials() = default;
  // How credentials are named in messages: "MUNGE" or "cluster-key".
  virtual std::string_view name() const = 0;
  // Where a caller gets one, for refusals: "a credential from munged with the site's key".
  virtual std::string_view source() const = 0;
  // A credential of the calling process. Errc::unavailable when the signer (munged,
  // corral-authd) cannot be reached.
  virtual Result<std::string> encode(std::string_view payload) = 0;
  // The same, readable only by a process of `uid`: the payload can carry a secret for it.
  virtual Result<std::string> encode_for(std::string_view payload, uint32_t uid) = 0;
  // The payload must be `prefix` exactly (rest == nullptr) or start with it (the remainder
  // goes to *rest). Invalid, expired, replayed or foreign credentials: permission_denied.
  virtual Result<Identity> decode(std::string_view cred, std::string_view prefix, std::string* rest) = 0;
};

// Checks what it can at once (the key file's permissions); a signer that is down shows
// on the first encode.
Result<std::unique_ptr<Credentials>> make_credentials(const AuthConfig& config);

// A client's: CORRAL_AUTH (munge, the default, or cluster-key), CORRAL_MUNGE_SOCKET,
// CORRAL_AUTH_SOCKET.
Result<AuthConfig> client_auth_config();

}  // namespace corral::net
