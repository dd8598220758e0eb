// Reading fields of objects that come from the API server without trusting their shape:
// a missing field, a null or a value of the wrong type reads as empty, never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace corral::storage::dws {

inline const nlohmann::json& empty_object() {
  static const nlohmann::json e = nlohmann::json::object();
  return e;
}
inline const nlohmann::json& empty_array() {
  static const nlohmann::json e = nlohmann::json::array();
  return e;
}
inline const nlohmann::json& obj_at(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return empty_object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty_object();
}
inline const nlohmann::json& arr_at(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return empty_array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty_array();
}
inline std::string str_at(const nlohmann::json& j, std::string_view key, std::string_view dflt = {}) {
  if (!j.is_object()) return std::string(dflt);
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(dflt);
}
inline bool bool_at(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
inline uint64_t u64_at(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  return it->is_number_unsigned() || it->get<int64_t>() >= 0 ? it->get<uint64_t>() : 0;
}

}  // namespace corral::storage::dws
