#include "fabric/infiniband/ib_request.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_fabrics.h"
#include "fabric/infiniband/parse_unsigned.h"

namespace corral::fabric::infiniband {
namespace {

constexpr size_t kMaxValue = 128;
constexpr size_t kMaxOption = 1024;

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isprint(static_cast<unsigned char>(c)); });
}

Result<unsigned> small_number(std::string_view key, std::string_view v, unsigned max) {
  auto n = parse_unsigned(v, 10, max);
  if (!n) return invalid(fmt::format("{}: '{}' is not a number from 0 to {}", key, v.substr(0, 16), max));
  return static_cast<unsigned>(*n);
}

// Sets one key of `r`; the names are the seed's and the short forms.
Status apply(IbRequest& r, std::string_view key, std::string_view v) {
  if (v.size() > kMaxValue || !printable(v))
    return invalid(fmt::format("{}: the value must be at most {} printable characters", key, kMaxValue));
  if (key == "device") {
    if (v.empty()) return invalid("device: empty (the model name, e.g. \"MT28908 Family [ConnectX-6]\")");
    r.device = v;
  } else if (key == "fabric") {
    if (!valid_name(v)) return invalid(fmt::format("fabric: '{}' is not a fabric name", v));
    r.fabric = v;
  } else if (key == "instance" || key == "device_instance") {
    auto n = small_number(key, v, 255);
    if (!n) return n.error();
    r.instance = *n;
  } else if (key == "function_type") {
    if (v != "physical" && v != "virtual")
      return invalid(fmt::format("function_type: '{}' is neither physical nor virtual", v));
    r.virtual_function = v == "virtual";
  } else if (key == "vf" || key == "virtual_function_id") {
    auto n = small_number(key, v, kMaxVfId);
    if (!n) return n.error();
    r.vf = *n;
    r.virtual_function = true;
  } else if (key == "partition") {
    if (!valid_name(v)) return invalid(fmt::format("partition: '{}' is not a partition name", v));
    r.partition = v;
  } else {
    return invalid(
        fmt::format("unknown key '{}' (device, fabric, instance, function_type, vf, partition)", key.substr(0, 32)));
  }
  return {};
}

}  // namespace

Result<IbRequest> parse_ib_option(std::string_view text) {
  if (text.size() > kMaxOption) return invalid(fmt::format("--ib: longer than {} characters", kMaxOption));
  IbRequest r;
  bool had_device = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) return invalid(fmt::format("--ib: '{}' is not key=value", text.substr(i, 32)));
    std::string_view key = text.substr(i, eq - i);
    std::string value;
    size_t j = eq + 1;
    if (j < text.size() && text[j] == '"') {
      size_t close = text.find('"', j + 1);
      if (close == std::string_view::npos) return invalid(fmt::format("--ib {}: the quote is not closed", key));
      value = text.substr(j + 1, close - j - 1);
      j = close + 1;
      if (j < text.size() && text[j] != ',') return invalid(fmt::format("--ib {}: text after the closing quote", key));
    } else {
      size_t comma = text.find(',', j);
      value = text.substr(j, comma == std::string_view::npos ? std::string_view::npos : comma - j);
      j = comma == std::string_view::npos ? text.size() : comma;
    }
    if (auto st = apply(r, key, value); !st) return invalid("--ib " + st.message());
    had_device = had_device || key == "device";
    i = j < text.size() ? j + 1 : j;
  }
  if (!had_device)
    return invalid("--ib: device= is required (the model name, e.g. device=\"MT28908 Family [ConnectX-6]\")");
  if (r.vf && !r.virtual_function)
    return invalid("--ib: vf= asks for a virtual function; function_type=physical contradicts it");
  return r;
}

nlohmann::json to_json(const std::vector<IbRequest>& reqs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : reqs) {
    nlohmann::json e = {{"device", r.device},
                        {"device_instance", r.instance},
                        {"function_type", r.virtual_function ? "virtual" : "physical"}};
    if (!r.fabric.empty()) e["fabric"] = r.fabric;
    if (r.vf) e["virtual_function_id"] = *r.vf;
    if (!r.partition.empty()) e["partition"] = r.partition;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<IbRequest>> requests_from_json(const nlohmann::json& j) {
  if (!j.is_array() || j.size() > kMaxIbInterfaces)
    return invalid(fmt::format("infiniband: a list of at most {} interfaces is expected", kMaxIbInterfaces));
  std::vector<IbRequest> out;
  for (const auto& e : j) {
    if (e.is_string()) {  // an --ib value as typed
      auto r = parse_ib_option(e.get_ref<const std::string&>());
      if (!r) return r.error();
      out.push_back(std::move(*r));
      continue;
    }
    if (!e.is_object()) return invalid("infiniband: each interface is an --ib string or an object");
    IbRequest r;
    bool had_device = false;
    for (const auto& [k, v] : e.items()) {
      std::string text;
      if (v.is_string())
        text = v.get<std::string>();
      else if (v.is_number_unsigned())
        text = std::to_string(v.get<uint64_t>());
      else
        return invalid(fmt::format("infiniband: '{}' must be a string or a number from 0 up", k.substr(0, 32)));
      if (auto st = apply(r, k, text); !st) return invalid("infiniband: " + st.message());
      had_device = had_device || k == "device";
    }
    if (!had_device) return invalid("infiniband: every interface needs a device");
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace corral::fabric::infiniband
