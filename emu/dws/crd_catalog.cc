#include "crd_catalog.h"

#include <algorithm>
#include <filesystem>

#include "storage/dws/yaml_json.h"

namespace corral::emu::dws {
namespace {

using nlohmann::json;

Result<KindInfo> kind_from_crd(const json& crd, const std::string& version, const std::string& file) {
  KindInfo k;
  const json& spec = crd.at("spec");
  k.group = spec.at("group").get<std::string>();
  k.version = version;
  const json& names = spec.at("names");
  k.kind = names.at("kind").get<std::string>();
  k.list_kind = names.value("listKind", k.kind + "List");
  k.plural = names.at("plural").get<std::string>();
  k.singular = names.value("singular", k.plural);
  k.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
  for (const auto& v : spec.at("versions")) {
    if (v.value("name", "") != version) continue;
    if (!v.value("served", false)) return invalid(file + ": version " + version + " is not served");
    k.schema = v.at("schema").at("openAPIV3Schema");
    k.status_subresource = v.contains("subresources") && v["subresources"].contains("status");
    if (v.contains("additionalPrinterColumns"))
      for (const auto& c : v["additionalPrinterColumns"])
        k.columns.push_back(PrinterColumn{c.value("name", ""), c.value("type", "string"), c.value("jsonPath", ""),
                                          c.value("description", ""), c.value("priority", 0)});
    return k;
  }
  return invalid(file + ": no version " + version);
}

}  // namespace

Result<CrdCatalog> CrdCatalog::load(const std::string& dir, const std::string& version) {
  CrdCatalog cat;
  cat.version_ = version;
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  if (ec) return io_error("cannot list CRD directory " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto docs = storage::dws::yaml_file_documents(f);
    if (!docs) return docs.error();
    for (const auto& d : *docs) {
      if (d.value("kind", "") != "CustomResourceDefinition") continue;
      try {
        auto k = kind_from_crd(d, version, f);
        if (!k) return k.error();
        if (cat.group_.empty()) cat.group_ = k->group;
        cat.kinds_.push_back(std::move(*k));
      } catch (const json::exception& e) {
        return invalid(f + ": not a CustomResourceDefinition: " + e.what());
      }
    }
  }
  if (cat.kinds_.empty()) return invalid("no CustomResourceDefinition in " + dir);
  return cat;
}

const KindInfo* CrdCatalog::by_plural(const std::string& plural) const {
  for (const auto& k : kinds_)
    if (k.plural == plural) return &k;
  return nullptr;
}

const KindInfo* CrdCatalog::by_kind(const std::string& kind) const {
  for (const auto& k : kinds_)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace corral::emu::dws
