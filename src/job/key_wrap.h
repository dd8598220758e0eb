// Keys sent to node agents travel wrapped (AES-256 key wrap, RFC 3394) under a key the
// agent and the controller share for one connection: a network observer, or a user who
// can read the traffic, learns nothing, and a changed wrapped key fails to unwrap.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::job {

// `kek` is 32 bytes; `key` a multiple of 8 bytes, at least 16. The result is 8 bytes longer.
Result<std::string> wrap_key(std::string_view kek, std::string_view key);
// Refuses (permission_denied) a wrapped key that was not made with `kek` or was altered.
Result<std::string> unwrap_key(std::string_view kek, std::string_view wrapped);

}  // namespace corral::job
