#include "util/idset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

IdSet ids(std::string_view text) {
  auto set = IdSet::parse(text);
  EXPECT_TRUE(set.ok()) << text << ": " << (set.ok() ? "" : set.message());
  return set.ok() ? *set : IdSet();
}

std::string parse_error(std::string_view text) {
  auto set = IdSet::parse(text);
  EXPECT_FALSE(set.ok()) << text << " should not parse";
  if (set.ok()) return "";
  EXPECT_EQ(set.error().code, Errc::invalid_argument);
  return set.message();
}

// The examples of Flux RFC 22: the three spellings name the same set.
TEST(IdSetRfc22, ExamplesDecodeToTheSameSet) {
  IdSet plain = ids("1,2,3,5,6,42");
  EXPECT_EQ(ids("1-3,5-6,42"), plain);
  EXPECT_EQ(ids("[1-3,5-6,42]"), plain);
  EXPECT_THAT(plain.to_vector(), ElementsAre(1, 2, 3, 5, 6, 42));
  EXPECT_EQ(plain.encode(), "1-3,5-6,42");
  EXPECT_EQ(plain.encode(true), "[1-3,5-6,42]");
}

TEST(IdSetRfc22, EncodingIsAscendingWithoutDuplicates) {
  EXPECT_EQ(ids("5,3,4,3,0").encode(), "0,3-5");
  EXPECT_EQ(ids("7").encode(true), "7");  // brackets only for more than one id
  EXPECT_EQ(ids("").encode(), "");
  EXPECT_TRUE(ids("[]").empty());
  EXPECT_EQ(ids("0-3,4-6").ranges().size(), 1u);  // adjacent ranges merge
  EXPECT_EQ(ids("4294967295").encode(), "4294967295");
}

TEST(IdSetRfc22, RejectsCharactersOutsideTheGrammar) {
  EXPECT_THAT(parse_error("1,a"), HasSubstr("\"a\" is not a non-negative integer at column 3"));
  EXPECT_THAT(parse_error("-1"), HasSubstr("missing number"));
  EXPECT_THAT(parse_error("1, 2"), HasSubstr("\" 2\""));
  EXPECT_THAT(parse_error("5-1"), HasSubstr("reversed range \"5-1\" at column 1"));
  EXPECT_THAT(parse_error("1,,2"), HasSubstr("empty element at column 3"));
  EXPECT_THAT(parse_error("1,"), HasSubstr("empty element"));
  EXPECT_THAT(parse_error("[1-3"), HasSubstr("'[' without a closing ']'"));
  EXPECT_THAT(parse_error("1-3]"), HasSubstr("']' without an opening '['"));
  EXPECT_THAT(parse_error("4294967296"), HasSubstr("larger than 4294967295"));
  EXPECT_THAT(parse_error("1-2-3"), HasSubstr("\"2-3\""));
}

TEST(IdSet, InsertEraseContains) {
  IdSet s;
  for (uint32_t i = 0; i < 10; ++i) s.insert(i);
  EXPECT_EQ(s.encode(), "0-9");
  s.erase(0);
  s.erase(5);
  s.erase(9);
  s.erase(100);  // absent: no effect
  EXPECT_EQ(s.encode(), "1-4,6-8");
  EXPECT_TRUE(s.contains(4));
  EXPECT_FALSE(s.contains(5));
  EXPECT_FALSE(s.contains(0));
  EXPECT_FALSE(s.contains(9));
  s.insert(5);
  EXPECT_EQ(s.encode(), "1-8");
  s.insert_range(20, 30);
  s.insert_range(10, 19);
  s.insert_range(3, 2);  // empty
  EXPECT_EQ(s.encode(), "1-8,10-30");
  s.insert_range(0, 40);
  EXPECT_EQ(s.encode(), "0-40");
}

TEST(IdSet, Accessors) {
  IdSet s = ids("3-5,10");
  EXPECT_EQ(s.count(), 4u);
  EXPECT_EQ(s.first(), 3u);
  EXPECT_EQ(s.last(), 10u);
  EXPECT_EQ(s.nth(0), 3u);
  EXPECT_EQ(s.nth(3), 10u);
  EXPECT_FALSE(s.nth(4));
  EXPECT_FALSE(IdSet().first());
  EXPECT_FALSE(IdSet().last());
  EXPECT_EQ(IdSet::range(2, 4), ids("2-4"));
  EXPECT_EQ(IdSet::range(0, 4294967295u).count(), 4294967296u);
}

TEST(IdSet, SetOperations) {
  IdSet a = ids("0-10,20-30");
  IdSet b = ids("5-25,40");
  EXPECT_EQ(a.union_with(b).encode(), "0-30,40");
  EXPECT_EQ(a.intersect(b).encode(), "5-10,20-25");
  EXPECT_EQ(a.minus(b).encode(), "0-4,26-30");
  EXPECT_EQ(b.minus(a).encode(), "11-19,40");
  EXPECT_EQ(a.minus(ids("0-100")).encode(), "");
  EXPECT_EQ(a.minus(IdSet()), a);
  EXPECT_EQ(ids("0-4294967295").minus(ids("4294967295")).encode(), "0-4294967294");
  EXPECT_EQ(ids("0-4294967295").minus(ids("0,7")).encode(), "1-6,8-4294967295");
  EXPECT_EQ(ids("1-3,5").intersect(ids("3-5")).encode(), "3,5");
}

TEST(IdSet, CountCommonIsTheIntersectionsSize) {
  const std::vector<std::pair<const char*, const char*>> pairs = {
      {"0-10,20-30", "5-25,40"},        {"1-3,5", "3-5"},       {"0-63", ""},  {"", "0-7"},
      {"0-4294967295", "7,4294967295"}, {"0,2,4,6", "1,3,5,7"}, {"0-9", "0-9"}};
  for (const auto& [x, y] : pairs) {
    SCOPED_TRACE(std::string(x) + " & " + y);
    EXPECT_EQ(ids(x).count_common(ids(y)), ids(x).intersect(ids(y)).count());
    EXPECT_EQ(ids(y).count_common(ids(x)), ids(x).intersect(ids(y)).count());
  }
}

}  // namespace
}  // namespace corral
