// Host names to addresses, for checking that a peer is the host it claims to be.
#pragma once

#include <string>
#include <vector>

namespace corral::net {

// The IPv4 addresses `name` resolves to (hosts file, then DNS), in dotted form, without
// duplicates; empty when it does not resolve or is not a host name (over 253 bytes).
std::vector<std::string> resolve_ipv4(const std::string& name);

}  // namespace corral::net
