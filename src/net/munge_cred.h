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

// The Credentials (net/credentials.h) of munged at `socket` ("" its default). Encoding
// fails with Errc::unavailable when munged cannot be reached; an invalid, expired, replayed
// or foreign credential is Errc::permission_denied with munged's reason. encode_for sets
// MUNGE_OPT_UID_RESTRICTION: munged refuses to decode it for anyone else.
std::unique_ptr<Credentials> munge_credentials(std::string socket);

}  // namespace corral::net
