// Who a request comes from when it crosses hosts: MUNGE, the HPC convention. munged runs
// on every host with the site's shared key; a credential encoded on one host carries the
// encoding process's uid and gid, and munged on another host decodes it once (a second
// decode of the same credential is refused as a replay) within its time to live.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "net/credentials.h"
#include "util/result.h"

namespace corral::net {

// libmunge's default: /run/munge/munge.socket.2.
inline constexpr std::string_view kDefaultMungeSocket = "/run/munge/munge.socket.2";
// A credential longer than this is refused before it reaches munged.
inline constexpr size_t kMaxMungeCredential = 4096;

// A credential for the calling process through munged at `socket` (empty: the default).
// Errc::unavailable when munged cannot be reached.
Result<std::string> munge_encode(const std::string& socket, std::string_view payload);
// The same, decodable only by processes running as `uid` (munged refuses everyone else):
// its payload can carry a secret for that uid alone.
Result<std::string> munge_encode_for(const std::string& socket, std::string_view payload, uint32_t uid);

// Decodes `cred` through munged at `socket`; the payload must be `payload`. An invalid,
// expired, replayed or foreign credential is Errc::permission_denied with munged's reason.
Result<Identity> munge_decode(const std::string& socket, std::string_view cred, std::string_view payload);
// The same for a payload that starts with `prefix`; what follows it is put in `rest`.
Result<Identity> munge_decode_prefixed(const std::string& socket, std::string_view cred, std::string_view prefix,
                                       std::string* rest);

// The Credentials (net/credentials.h) of munged at `socket` ("" its default).
std::unique_ptr<Credentials> munge_credentials(std::string socket);

}  // namespace corral::net
