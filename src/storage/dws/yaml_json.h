// YAML documents as JSON values, the way Kubernetes reads manifests: a plain scalar that
// reads as a boolean, an integer or a number becomes one, a quoted scalar stays a string.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace corral::storage::dws {

// Every document of a YAML stream ("---" separated); empty documents are skipped.
Result<std::vector<nlohmann::json>> yaml_documents(const std::string& text);
// The same, read from a file; errors name the file.
Result<std::vector<nlohmann::json>> yaml_file_documents(const std::string& path);

}  // namespace corral::storage::dws
