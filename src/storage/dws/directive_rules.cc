#include "storage/dws/directive_rules.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "storage/dws/yaml_json.h"

namespace corral::storage::dws {
namespace {

using nlohmann::json;

Result<std::regex> compile(const std::string& re, const std::string& what) {
  try {
    return std::regex(re, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    return invalid(what + ": '" + re + "' is not a valid regular expression");
  }
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string w = s.substr(i, j - i);
    w.erase(std::remove_if(w.begin(), w.end(), [](unsigned char c) { return std::isspace(c); }), w.end());
    if (!w.empty()) out.push_back(std::move(w));
    i = j + 1;
  }
  return out;
}

Result<RuleDef> rule_def(const json& j, const std::string& command) {
  RuleDef d;
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string())
    return invalid("rule '" + command + "': a ruleDef without a key");
  d.key = j["key"].get<std::string>();
  auto key_re = compile(d.key, "rule '" + command + "' key");
  if (!key_re) return key_re.error();
  d.key_re = std::move(*key_re);
  d.type = j.value("type", "string");
  if (j.contains("pattern") && j["pattern"].is_string()) {
    auto p = compile(j["pattern"].get<std::string>(), "rule '" + command + "' pattern");
    if (!p) return p.error();
    d.pattern = std::move(*p);
  }
  if (j.contains("patterns") && j["patterns"].is_array())
    for (const auto& p : j["patterns"]) {
      if (!p.is_string()) continue;
      auto re = compile(p.get<std::string>(), "rule '" + command + "' patterns");
      if (!re) return re.error();
      d.patterns.push_back(std::move(*re));
    }
  if (j.contains("min") && j["min"].is_number_integer()) d.min = j["min"].get<long long>();
  if (j.contains("max") && j["max"].is_number_integer()) d.max = j["max"].get<long long>();
  d.required = j.value("isRequired", false);
  d.value_required = j.value("isValueRequired", false);
  d.unique_within = j.value("uniqueWithin", "");
  return d;
}

bool matches(const std::regex& re, const std::string& s) { return std::regex_search(s, re); }

Status check_value(const RuleDef& def, const std::string& key, const std::string& v) {
  if (def.type == "integer") {
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin() + (v[0] == '-' ? 1 : 0), v.end(), [](unsigned char c) { return std::isdigit(c); }))
      return invalid("argument '" + key + "' invalid integer '" + v + "'");
    long long n = std::stoll(v);
    if (def.max && n > *def.max) return invalid("argument '" + key + "' greater than maximum");
    if (def.min && n < *def.min) return invalid("argument '" + key + "' less than minimum");
    return {};
  }
  if (def.type == "bool") {
    std::string l = v;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    if (def.pattern && l != "true" && l != "false")
      return invalid("argument '" + key + "' invalid boolean '" + v + "'");
    return {};
  }
  if (def.type == "list-of-string") {
    auto words = split_commas(v);
    for (size_t i = 0; i < words.size(); ++i) {
      if (std::find(words.begin(), words.begin() + static_cast<long>(i), words[i]) !=
          words.begin() + static_cast<long>(i))
        return invalid("argument '" + key + "': word '" + words[i] + "' repeated in list '" + v + "'");
      bool ok = def.patterns.empty() || std::any_of(def.patterns.begin(), def.patterns.end(),
                                                    [&](const auto& re) { return matches(re, words[i]); });
      if (!ok) return invalid("argument '" + key + "': invalid string '" + words[i] + "' in list '" + v + "'");
    }
    return {};
  }
  if (def.pattern && !matches(*def.pattern, v)) return invalid("argument '" + key + "' invalid string '" + v + "'");
  return {};
}

}  // namespace

Result<DirectiveRules> DirectiveRules::from_spec(const json& spec) {
  if (!spec.is_array()) return invalid("a DWDirectiveRule's spec must be a list of rules");
  DirectiveRules out;
  for (const auto& r : spec) {
    if (!r.is_object() || !r.contains("command") || !r["command"].is_string())
      return invalid("a DWDirectiveRule entry without a command");
    DirectiveRule rule;
    rule.command = r["command"].get<std::string>();
    rule.driver_label = r.value("driverLabel", "");
    if (r.contains("watchStates") && r["watchStates"].is_string())
      rule.watch_states = split_commas(r["watchStates"].get<std::string>());
    if (r.contains("ruleDefs") && r["ruleDefs"].is_array())
      for (const auto& d : r["ruleDefs"]) {
        auto def = rule_def(d, rule.command);
        if (!def) return def.error();
        rule.defs.push_back(std::move(*def));
      }
    out.rules_.push_back(std::move(rule));
  }
  return out;
}

Result<DirectiveRules> DirectiveRules::load_file(const std::string& path) {
  auto docs = yaml_file_documents(path);
  if (!docs) return docs.error();
  json spec = json::array();
  for (const auto& d : *docs) {
    if (!d.is_object() || d.value("kind", "") != "DWDirectiveRule") continue;
    if (d.contains("spec") && d["spec"].is_array())
      for (const auto& r : d["spec"]) spec.push_back(r);
  }
  if (spec.empty()) return invalid(path + ": no DWDirectiveRule with rules in it");
  auto rules = from_spec(spec);
  if (!rules) return invalid(path + ": " + rules.error().message);
  return rules;
}

std::vector<const DirectiveRule*> DirectiveRules::rules_for(const std::string& command) const {
  std::vector<const DirectiveRule*> out;
  for (const auto& r : rules_)
    if (r.command == command) out.push_back(&r);
  return out;
}

Status DirectiveRules::check_args(const DirectiveRule& rule, const Directive& d,
                                  std::vector<std::string>& unique_seen) const {
  auto where = [&](const Error& e) { return invalid(e.message + " in directive '" + d.text + "'"); };
  for (const auto& [key, value] : d.args) {
    const RuleDef* def = nullptr;
    for (const auto& rd : rule.defs)
      if (matches(rd.key_re, key)) {
        def = &rd;
        break;
      }
    if (!def) return invalid("unsupported argument '" + key + "' in directive '" + d.text + "'");
    std::string v;
    if (!value) {
      if (def->type != "bool" || def->value_required)
        return invalid("argument '" + key + "' requires value in directive '" + d.text + "'");
      v = "true";
    } else {
      v = *value;
    }
    if (auto st = check_value(*def, key, v); !st) return where(st.error());
    if (!def->unique_within.empty()) {
      std::string tag = def->unique_within + "\n" + v;
      if (std::find(unique_seen.begin(), unique_seen.end(), tag) != unique_seen.end())
        return invalid("value '" + v + "' must be unique within '" + def->unique_within + "' in directive '" + d.text +
                       "'");
      unique_seen.push_back(std::move(tag));
    }
  }
  for (const auto& def : rule.defs) {
    if (!def.required) continue;
    bool present =
        std::any_of(d.args.begin(), d.args.end(), [&](const auto& a) { return matches(def.key_re, a.first); });
    if (!present) return invalid("missing required argument '" + def.key + "' in directive '" + d.text + "'");
  }
  return {};
}

Status DirectiveRules::validate(const std::vector<std::string>& directives) const {
  std::vector<std::string> unique_seen;
  for (const auto& text : directives) {
    auto d = parse_directive(text);
    if (!d) return d.error();
    auto rules = rules_for(d->command);
    if (rules.empty()) return invalid("invalid directive '" + text + "'");
    for (const auto* r : rules)
      if (auto st = check_args(*r, *d, unique_seen); !st) return st;
  }
  return {};
}

}  // namespace corral::storage::dws
