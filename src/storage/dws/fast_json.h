// JSON text from the API server read into nlohmann::json by simdjson: a workflow's watch
// event in a third of the time nlohmann's own parser takes (docs/performance.md "Rabbit
// storage at 200 jobs/s"), and fields no reader wants (a workflow's status.drivers, half
// of it) never become nodes. Text simdjson refuses (numbers beyond 64 bits, nesting deeper
// than it reads) goes to nlohmann's parser, so what is accepted does not change.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace corral::storage::dws {

// A field to leave out, as the keys from the document's root ({"object", "status",
// "drivers"}); arrays in between are not looked into.
using JsonPath = std::vector<std::string>;

class FastJson {
 public:
  FastJson();
  ~FastJson();
  FastJson(const FastJson&) = delete;
  FastJson& operator=(const FastJson&) = delete;

  // The value of `text`, less the `omit` fields; a discarded value when it is not JSON.
  nlohmann::json parse(std::string_view text, const std::vector<JsonPath>& omit = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // simdjson's parser, its buffers kept from one text to the next
};

}  // namespace corral::storage::dws
