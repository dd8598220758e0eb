// What corral-authd and its clients say on its Unix socket: one request and one answer per
// connection, a few bytes each, with no framework in between (a client makes one or two
// credentials in its life; a gRPC channel for each cost more than munged's round trip).
//
//   request  "CAS1" | flags u8 (1: restricted) | restrict_uid u32 | length u16 | payload
//   answer   status u8 (0: the credential follows; 1: why not) | length u16 | text
//
// Integers are big-endian. The caller's uid and gid are not in the request: corral-authd
// takes them from the kernel (SO_PEERCRED).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::net {

inline constexpr std::string_view kAuthdMagic = "CAS1";
inline constexpr size_t kAuthdRequestHeader = 4 + 1 + 4 + 2;
inline constexpr size_t kAuthdMaxPayload = 1024;
inline constexpr size_t kAuthdAnswerHeader = 1 + 2;

struct AuthdRequest {
  std::optional<uint32_t> restrict_uid;
  std::string payload;
};

std::string encode_authd_request(const AuthdRequest& req);
// The header's payload length, or an error for a header that is not ours.
Result<size_t> authd_payload_length(std::string_view header);
// A whole request (header and payload) once authd_payload_length() accepted its header.
AuthdRequest decode_authd_request(std::string_view whole);
std::string encode_authd_answer(bool ok, std::string_view text);

// Client side: one credential from corral-authd at `socket` (10 s at most).
// Errc::unavailable when nobody answers there; permission_denied when it refuses.
Result<std::string> authd_sign(const std::string& socket, const AuthdRequest& req);

}  // namespace corral::net
