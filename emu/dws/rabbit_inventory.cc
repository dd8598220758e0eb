#include "rabbit_inventory.h"

#include <fstream>

#include "storage/dws/yaml_json.h"
#include "util/hostlist.h"

namespace corral::emu::dws {

using nlohmann::json;

Result<RabbitInventory> RabbitInventory::parse_spec(const std::string& spec, uint64_t capacity) {
  RabbitInventory inv;
  size_t i = 0;
  while (i < spec.size()) {
    size_t j = spec.find(';', i);
    if (j == std::string::npos) j = spec.size();
    std::string part = spec.substr(i, j - i);
    i = j + 1;
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos) return invalid("--rabbits: '" + part + "' is not RABBIT=HOSTLIST");
    auto hosts = Hostlist::parse(part.substr(eq + 1));
    if (!hosts) return invalid("--rabbits: " + hosts.error().message);
    inv.rabbits.push_back(Rabbit{part.substr(0, eq), capacity, hosts->hosts()});
  }
  return inv;
}

Result<RabbitInventory> RabbitInventory::load_mapping(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error("cannot read " + path);
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("rabbits") || !j["rabbits"].is_object())
    return invalid(path + ": not a rabbit mapping (no \"rabbits\" object)");
  RabbitInventory inv;
  for (const auto& [name, r] : j["rabbits"].items()) {
    auto hosts = Hostlist::parse(r.value("hostlist", ""));
    if (!hosts) return invalid(path + ": rabbit " + name + ": " + hosts.error().message);
    inv.rabbits.push_back(Rabbit{name, r.value("capacity", uint64_t{0}), hosts->hosts()});
  }
  return inv;
}

Status seed_objects(ObjectStore& store, const CrdCatalog& catalog, const RabbitInventory& inv,
                    const std::string& ruleset_path) {
  const KindInfo* rule_kind = catalog.by_kind("DWDirectiveRule");
  const KindInfo* storage_kind = catalog.by_kind("Storage");
  const KindInfo* config_kind = catalog.by_kind("SystemConfiguration");
  if (!rule_kind || !storage_kind || !config_kind)
    return invalid("the CRDs lack DWDirectiveRule, Storage or SystemConfiguration");
  auto docs = storage::dws::yaml_file_documents(ruleset_path);
  if (!docs) return docs.error();
  for (auto d : *docs) {
    if (d.value("kind", "") != "DWDirectiveRule") continue;
    std::string name = d["metadata"].value("name", "nnf");
    d["apiVersion"] = rule_kind->api_version();
    d["metadata"] = {{"name", name}};
    (void)store.create(*rule_kind, "dws-system", std::move(d));
  }
  json storage_nodes = json::array();
  for (const auto& r : inv.rabbits) {
    json computes = json::array(), access = json::array();
    for (size_t i = 0; i < r.computes.size(); ++i) {
      computes.push_back({{"name", r.computes[i]}, {"status", "Ready"}});
      access.push_back({{"name", r.computes[i]}, {"index", static_cast<int>(i)}});
    }
    storage_nodes.push_back({{"type", "Rabbit"}, {"name", r.name}, {"computesAccess", access}});
    json obj = {{"apiVersion", storage_kind->api_version()},
                {"kind", "Storage"},
                {"metadata", {{"name", r.name}, {"labels", {{"dataworkflowservices.github.io/storage", "Rabbit"}}}}},
                {"spec", {{"state", "Enabled"}, {"mode", "Live"}}},
                {"status",
                 {{"type", "NVMe"},
                  {"capacity", r.capacity},
                  {"status", "Ready"},
                  {"rebootRequired", false},
                  {"access",
                   {{"protocol", "PCIe"},
                    {"servers", json::array({{{"name", r.name}, {"status", "Ready"}}})},
                    {"computes", computes}}}}}};
    (void)store.create(*storage_kind, "default", std::move(obj));
  }
  json cfg = {{"apiVersion", config_kind->api_version()},
              {"kind", "SystemConfiguration"},
              {"metadata", {{"name", "default"}}},
              {"spec", {{"storageNodes", storage_nodes}, {"portsCooldownInSeconds", 60}}},
              {"status", {{"ready", true}}}};
  (void)store.create(*config_kind, "default", std::move(cfg));
  return {};
}

}  // namespace corral::emu::dws
