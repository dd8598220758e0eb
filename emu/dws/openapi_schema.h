// What a Kubernetes API server does with a custom resource's body against its CRD's
// structural OpenAPI v3 schema: drop fields the schema does not name (pruning), fill
// defaults, and report every violation with the field path and the message text the real
// server uses ("spec.desiredState: Unsupported value: ...").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace corral::emu::dws {

struct FieldError {
  std::string field;    // "spec.dwDirectives[2]"
  std::string reason;   // FieldValueRequired, FieldValueNotSupported, FieldValueInvalid, ...
  std::string message;  // "Unsupported value: \"x\": supported values: \"a\", \"b\""
};

// Prunes, defaults and checks `obj` (a whole object; `metadata` is left to the caller).
// `pruned`, when given, gets the path of every field dropped.
std::vector<FieldError> apply_schema(const nlohmann::json& schema, nlohmann::json& obj,
                                     std::vector<std::string>* pruned = nullptr);

}  // namespace corral::emu::dws
