// The cluster key: corrald derives each job's step-signing key from it, node agents check
// step credentials with it. Both read the same hex key file (mode 0600).
#pragma once

#include <string>

#include "util/result.h"

namespace corral::ctld {

// Reads the key at `path`, creating the file with a new random key when it does not exist.
// Errors name the file ("controller.key-file ...: ...").
Result<std::string> load_or_create_key_file(const std::string& path);

}  // namespace corral::ctld
