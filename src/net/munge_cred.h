// Who a request comes from when it crosses hosts: MUNGE, the HPC convention. munged runs
// on every host with the site's shared key; a credential encoded on one host carries the
// encoding process's uid and gid, and munged on another host decodes it once (a second
// decode of the same credential is refused as a replay) within its time to live.
// corral binds every credential to its purpose with a fixed payload, so a credential
// made for something else (another MUNGE user on the site) is not taken for a request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::net {

// libmunge's default: /run/munge/munge.socket.2.
inline constexpr std::string_view kDefaultMungeSocket = "/run/munge/munge.socket.2";
// The payload of a credential for a request to corrald.
inline constexpr std::string_view kMungeRequestPayload = "corral-request-v1";
// The payload of the credential corrald answers an agent's stream with: proof to the agent
// that the controller is a root process on the controller's host (a request credential is
// never taken for it).
inline constexpr std::string_view kMungeControllerPayload = "corral-controller-v1";
// The gRPC metadata key the credential travels in.
inline constexpr std::string_view kMungeMetadataKey = "x-corral-munge";
// A credential longer than this is refused before it reaches munged.
inline constexpr size_t kMaxMungeCredential = 4096;

struct MungeIdentity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string origin;  // IPv4 address of the host whose munged made it ("" if unknown)
};

// A credential for the calling process through munged at `socket` (empty: the default).
// Errc::unavailable when munged cannot be reached.
Result<std::string> munge_encode(const std::string& socket, std::string_view payload);
// The same, decodable only by processes running as `uid` (munged refuses everyone else):
// its payload can carry a secret for that uid alone.
Result<std::string> munge_encode_for(const std::string& socket, std::string_view payload, uint32_t uid);

// Decodes `cred` through munged at `socket`; the payload must be `payload`. An invalid,
// expired, replayed or foreign credential is Errc::permission_denied with munged's reason.
Result<MungeIdentity> munge_decode(const std::string& socket, std::string_view cred, std::string_view payload);
// The same for a payload that starts with `prefix`; what follows it is put in `rest`.
Result<MungeIdentity> munge_decode_prefixed(const std::string& socket, std::string_view cred, std::string_view prefix,
                                            std::string* rest);

}  // namespace corral::net
