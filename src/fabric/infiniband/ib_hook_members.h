// Which ports a job joined to which partition keys (key -> port GUIDs), as the infiniband
// hook learns it from the nodes' prologs and keeps it in the job's events and saved state,
// so the subnet manager can be told to take them out again, even after a restart.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace corral::fabric::infiniband {

using PkeyMembers = std::map<uint16_t, std::set<std::string>>;

// The event posted before the subnet manager is asked: {"members": {"0x1001": [GUID...]}}.
inline constexpr const char* kJoinEvent = "infiniband-join";

// The subnet manager confirms that a released job's ports left their keys as a node
// confirms its undo: under this name, which no node can have.
inline constexpr const char* kSubnetManager = "(subnet manager)";

nlohmann::json members_json(const PkeyMembers& m);
// Skips what is not a key (0x0001-0x7ffe) or a GUID (16 hex digits).
PkeyMembers members_of_json(const nlohmann::json& j);
// Adds the keys and GUIDs of a node prolog's document (its "config: " line); the default
// partition's are left out (every port is in it already).
void members_from_output(const std::string& output, PkeyMembers& out);

}  // namespace corral::fabric::infiniband
