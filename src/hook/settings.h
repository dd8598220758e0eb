// A hook's own section of corrald's configuration ([slingshot], ...). The controller does
// not know a hook's keys: it hands the section over as read, and the hook checks and takes
// each key with these readers, whose errors name the file and key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace corral::hook {

struct Setting {
  enum class Kind { string, integer, floating, boolean, other };
  std::string key;
  Kind kind = Kind::other;
  std::string text;   // a string's value; a number or a boolean as written
  std::string where;  // "corral.toml: slingshot.vni-pool" or "--set slingshot.vni-pool=...": for messages
};
using Settings = std::vector<Setting>;  // in file order, then the --set overrides: the last wins

// An array of tables in a hook's section ([[infiniband.fabric]] name = ...) arrives as one
// setting per field, keyed "fabric[0].name"; at most this many tables per array.
inline constexpr size_t kMaxSettingTables = 1024;
struct TableKey {
  std::string array;  // "fabric"
  size_t index = 0;   // 0
  std::string field;  // "name"
};
// The parts of "fabric[0].name"; nullopt for a plain key.
std::optional<TableKey> table_key(const std::string& key);

Status read_string(const Setting& s, std::string& out);
Status read_bool(const Setting& s, bool& out);
Status read_uint(const Setting& s, unsigned& out, unsigned max);
// A number of seconds, or a string such as "30s" or "5m".
Status read_duration(const Setting& s, double& out);
Error unknown_key(const Setting& s);

}  // namespace corral::hook
