#include "openapi_schema.h"

#include <regex>

#include <fmt/format.h>

namespace corral::emu::dws {
namespace {

using nlohmann::json;

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool type_ok(const std::string& want, const json& v) {
  if (want == "integer") return v.is_number_integer();
  if (want == "number") return v.is_number();
  if (want == "string") return v.is_string();
  if (want == "boolean") return v.is_boolean();
  if (want == "array") return v.is_array();
  if (want == "object") return v.is_object();
  return true;
}

class Checker {
 public:
  std::vector<FieldError> errors;
  std::vector<std::string>* pruned = nullptr;

  void check(const json& s, json& v, const std::string& path) {
    if (v.is_null() && s.value("nullable", false)) return;
    if (s.value("x-kubernetes-int-or-string", false)) {
      if (!v.is_number_integer() && !v.is_string())
        add(path, "FieldValueTypeInvalid",
            fmt::format("Invalid value: \"{}\": {} in body must be of type integer,string: \"{}\"", type_of(v), path,
                        type_of(v)));
      return;
    }
    std::string want = s.value("type", "");
    if (!want.empty() && !type_ok(want, v)) {
      add(path, "FieldValueTypeInvalid",
          fmt::format("Invalid value: \"{}\": {} in body must be of type {}: \"{}\"", type_of(v), path, want,
                      type_of(v)));
      return;
    }
    if (s.contains("enum")) check_enum(s["enum"], v, path);
    if (v.is_string()) check_string(s, v.get_ref<const std::string&>(), path);
    if (v.is_number()) check_number(s, v, path);
    if (v.is_array()) check_array(s, v, path);
    if (v.is_object()) check_object(s, v, path);
  }

 private:
  void add(const std::string& path, std::string reason, std::string message) {
    errors.push_back(FieldError{path, std::move(reason), std::move(message)});
  }

  void check_enum(const json& allowed, const json& v, const std::string& path) {
    for (const auto& a : allowed)
      if (a == v) return;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a.dump();
    add(path, "FieldValueNotSupported", fmt::format("Unsupported value: {}: supported values: {}", v.dump(), list));
  }

  void check_string(const json& s, const std::string& v, const std::string& path) {
    if (s.contains("maxLength") && v.size() > s["maxLength"].get<size_t>())
      add(path, "FieldValueTooLong", fmt::format("Too long: may not be longer than {}", s["maxLength"].get<size_t>()));
    if (s.contains("minLength") && v.size() < s["minLength"].get<size_t>())
      add(path, "FieldValueInvalid",
          fmt::format("Invalid value: \"{}\": {} in body should be at least {} chars long", v, path,
                      s["minLength"].get<size_t>()));
    if (s.contains("pattern")) {
      const auto& p = s["pattern"].get_ref<const std::string&>();
      bool ok = false;
      try {
        ok = std::regex_search(v, std::regex(p));
      } catch (const std::regex_error&) {
        ok = true;  // a pattern std::regex cannot read is not the object's fault
      }
      if (!ok)
        add(path, "FieldValueInvalid", fmt::format("Invalid value: \"{}\": {} in body should match '{}'", v, path, p));
    }
  }

  void check_number(const json& s, const json& v, const std::string& path) {
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>())
      add(path, "FieldValueInvalid",
          fmt::format("Invalid value: {}: {} in body should be greater than or equal to {}", v.dump(), path,
                      s["minimum"].dump()));
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>())
      add(path, "FieldValueInvalid",
          fmt::format("Invalid value: {}: {} in body should be less than or equal to {}", v.dump(), path,
                      s["maximum"].dump()));
  }

  void check_array(const json& s, json& v, const std::string& path) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      add(path, "FieldValueInvalid",
          fmt::format("Invalid value: {}: {} in body should have at least {} items", v.size(), path,
                      s["minItems"].get<size_t>()));
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      add(path, "FieldValueTooMany",
          fmt::format("Too many: {}: must have at most {} items", v.size(), s["maxItems"].get<size_t>()));
    if (!s.contains("items")) return;
    for (size_t i = 0; i < v.size(); ++i) check(s["items"], v[i], fmt::format("{}[{}]", path, i));
  }

  void check_object(const json& s, json& v, const std::string& path) {
    bool preserve = s.value("x-kubernetes-preserve-unknown-fields", false);
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
    if (props) {
      for (auto it = props->begin(); it != props->end(); ++it)
        if (!v.contains(it.key()) && it.value().contains("default")) v[it.key()] = it.value()["default"];
    }
    for (auto it = v.begin(); it != v.end();) {
      const std::string key = it.key();
      if (props && props->contains(key)) {
        if (!(path.empty() && key == "metadata")) check((*props)[key], it.value(), child(key));
        ++it;
      } else if (extra && extra->is_object()) {
        check(*extra, it.value(), child(key));
        ++it;
      } else if (preserve || (extra && extra->is_boolean() && extra->get<bool>()) ||
                 (path.empty() && (key == "apiVersion" || key == "kind"))) {
        ++it;
      } else {
        if (pruned) pruned->push_back(child(key));
        it = v.erase(it);  // pruned, as the API server does for unknown fields
      }
    }
    if (s.contains("required"))
      for (const auto& r : s["required"]) {
        const auto& k = r.get_ref<const std::string&>();
        if (!v.contains(k)) add(child(k), "FieldValueRequired", "Required value");
      }
  }
};

}  // namespace

std::vector<FieldError> apply_schema(const json& schema, json& obj, std::vector<std::string>* pruned) {
  Checker c;
  c.pruned = pruned;
  c.check(schema, obj, "");
  return std::move(c.errors);
}

}  // namespace corral::emu::dws
