#include "storage/dws/fast_json.h"

#include <simdjson.h>

namespace corral::storage::dws {
namespace {

using nlohmann::json;
namespace dom = simdjson::dom;

// Deeper documents go to nlohmann's parser: the conversion below recurses once a level.
constexpr size_t kMaxDepth = 256;

// `path`: the keys from the root to `e`, to match the omitted fields against.
json convert(dom::element e, std::vector<std::string_view>& path, const std::vector<JsonPath>& omit) {
  switch (e.type()) {
    case dom::element_type::OBJECT: {
      json out = json::object();
      dom::object obj = e.get_object().value_unsafe();
      for (auto [key, value] : obj) {
        bool skip = false;
        for (const auto& o : omit)
          if (o.size() == path.size() + 1 && o.back() == key && std::equal(path.begin(), path.end(), o.begin())) {
            skip = true;
            break;
          }
        if (skip) continue;
        path.push_back(key);
        out[std::string(key)] = convert(value, path, omit);  // a repeated key: the last wins, as in nlohmann
        path.pop_back();
      }
      return out;
    }
    case dom::element_type::ARRAY: {
      json out = json::array();
      dom::array arr = e.get_array().value_unsafe();
      static const std::vector<JsonPath> none;
      std::vector<std::string_view> inside;  // keys below an array are not matched
      for (dom::element v : arr) out.push_back(convert(v, inside, none));
      return out;
    }
    case dom::element_type::STRING:
      return std::string(e.get_string().value_unsafe());
    case dom::element_type::INT64:
      return e.get_int64().value_unsafe();
    case dom::element_type::UINT64:
      return e.get_uint64().value_unsafe();
    case dom::element_type::DOUBLE:
      return e.get_double().value_unsafe();
    case dom::element_type::BOOL:
      return e.get_bool().value_unsafe();
    case dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

struct FastJson::Impl {
  dom::parser parser{simdjson::SIMDJSON_MAXSIZE_BYTES};
  Impl() {
    // Failing here (no memory) leaves a parser that refuses every text: nlohmann's then reads it.
    [[maybe_unused]] simdjson::error_code err = parser.allocate(64 * 1024, kMaxDepth);
  }
};

FastJson::FastJson() : impl_(std::make_unique<Impl>()) {}
FastJson::~FastJson() = default;

json FastJson::parse(std::string_view text, const std::vector<JsonPath>& omit) {
  // realloc_if_needed: the text is copied into padding simdjson may read past its end.
  auto doc = impl_->parser.parse(text.data(), text.size(), true);
  if (doc.error() != simdjson::SUCCESS) return json::parse(text, nullptr, false);
  std::vector<std::string_view> path;
  return convert(doc.value_unsafe(), path, omit);
}

}  // namespace corral::storage::dws
