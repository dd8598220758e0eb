// simdjson's reading of API server text is the same value nlohmann's parser gives, less
// the fields left out; whatever simdjson refuses is still read (or refused) by nlohmann.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "storage/dws/fast_json.h"

namespace corral::storage::dws {
namespace {

using nlohmann::json;

json random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 4 ? 4 : 6);
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng()) - (1ll << 31);
    case 3: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
    case 4: {
      static const char* const pieces[] = {"a", "Z", "9", " ", "\"", "\\", "/", "\n", "\t", "\u00e9", "\u4e2d"};
      std::string s;
      for (int i = 0, n = rng() % 12; i < n; ++i) s += pieces[rng() % std::size(pieces)];
      return s;
    }
    case 5: {
      json a = json::array();
      for (int i = 0, n = rng() % 4; i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = 0, n = rng() % 5; i < n; ++i) o["k" + std::to_string(rng() % 7)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(FastJson, ReadsWhatNlohmannReads) {
  FastJson fast;
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    const std::string text = random_value(rng, 0).dump();
    EXPECT_EQ(fast.parse(text), json::parse(text)) << text;
  }
  for (const char* text : {R"({"a":1,"a":2})", R"(18446744073709551615)", R"(-9223372036854775808)",
                           R"(123456789012345678901234567890)", R"("\ud83d\ude00")", R"([1.5e300,-0.0,1e-300])"})
    EXPECT_EQ(fast.parse(text), json::parse(text)) << text;
}

TEST(FastJson, RefusesWhatNlohmannRefuses) {
  FastJson fast;
  for (const char* text : {"", "{", R"({"a":})", "[1,]", "\"\xff\"", "nul", R"({"a":1} x)"})
    EXPECT_TRUE(fast.parse(text).is_discarded()) << text;
}

TEST(FastJson, DeepTextGoesToNlohmann) {
  FastJson fast;
  std::string deep(3000, '[');
  deep += std::string(3000, ']');
  json j = fast.parse(deep);
  ASSERT_FALSE(j.is_discarded());
  int depth = 0;
  for (const json* p = &j; p->is_array() && !p->empty(); p = &(*p)[0]) ++depth;
  EXPECT_EQ(depth, 2999);
}

TEST(FastJson, LeavesOutTheNamedFieldsOnly) {
  FastJson fast;
  const std::string ev = R"({"type":"MODIFIED","object":{"metadata":{"name":"w","drivers":1},
    "status":{"state":"PreRun","drivers":[{"status":"Completed"}],"env":{"drivers":"kept"}},
    "items":[{"status":{"drivers":2}}]}})";
  json j = fast.parse(ev, {{"object", "status", "drivers"}});
  json want = json::parse(ev);
  want["object"]["status"].erase("drivers");
  EXPECT_EQ(j, want);
  EXPECT_EQ(fast.parse(ev), json::parse(ev));
}

}  // namespace
}  // namespace corral::storage::dws
