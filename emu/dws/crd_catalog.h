// The kinds the emulated API server serves, read from CustomResourceDefinition files: names,
// scope, the served version's OpenAPI schema, whether it has a /status subresource, and
// the printer columns `kubectl get` shows.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace corral::emu::dws {

struct PrinterColumn {
  std::string name, type, json_path, description;
  int priority = 0;
};

struct KindInfo {
  std::string group, version, kind, list_kind, plural, singular;
  bool namespaced = true;
  bool status_subresource = false;
  nlohmann::json schema;  // openAPIV3Schema of `version`
  std::vector<PrinterColumn> columns;

  std::string api_version() const { return group + "/" + version; }
  std::string resource() const { return plural + "." + group; }  // "workflows.dataworkflowservices.github.io"
};

class CrdCatalog {
 public:
  // Every CRD file (*.yaml) in `dir`; `version` must be served by each.
  static Result<CrdCatalog> load(const std::string& dir, const std::string& version);

  const KindInfo* by_plural(const std::string& plural) const;
  const KindInfo* by_kind(const std::string& kind) const;
  const std::vector<KindInfo>& kinds() const { return kinds_; }
  const std::string& group() const { return group_; }
  const std::string& version() const { return version_; }

 private:
  std::vector<KindInfo> kinds_;
  std::string group_, version_;
};

}  // namespace corral::emu::dws
