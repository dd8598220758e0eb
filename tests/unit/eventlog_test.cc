#include "job/eventlog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::job {
namespace {

using ::testing::HasSubstr;

TEST(EventlogTest, EncodesKeysInRfcOrderWithMicroseconds) {
  Event ev{1700000000.123456, "submit", R"({"urgency":16})"};
  EXPECT_EQ(encode_event(ev), R"({"timestamp":1700000000.123456,"name":"submit","context":{"urgency":16}})");
  Event empty{1.5, "clean", ""};
  EXPECT_EQ(encode_event(empty), R"({"timestamp":1.500000,"name":"clean","context":{}})");
}

TEST(EventlogTest, EscapesNames) {
  Event ev{0, "we\"ird", "{}"};
  auto back = decode_event(encode_event(ev));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->name, "we\"ird");
}

TEST(EventlogTest, RoundTrip) {
  Event ev{1700000000.5, "exception", R"({"note":"cancel requested","severity":0,"type":"cancel"})"};
  auto back = decode_event(encode_event(ev));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, ev);
}

TEST(EventlogTest, ContextIsOptional) {
  auto ev = decode_event(R"({"timestamp":3,"name":"depend"})");
  ASSERT_TRUE(ev.ok()) << ev.message();
  EXPECT_EQ(ev->context, "{}");
  EXPECT_DOUBLE_EQ(ev->timestamp, 3.0);
}

TEST(EventlogTest, BadEvents) {
  EXPECT_THAT(decode_event("nope").message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(decode_event("[1]").message(), HasSubstr("JSON object"));
  EXPECT_THAT(decode_event(R"({"name":"x"})").message(), HasSubstr("timestamp"));
  EXPECT_THAT(decode_event(R"({"timestamp":"1","name":"x"})").message(), HasSubstr("timestamp"));
  EXPECT_THAT(decode_event(R"({"timestamp":1})").message(), HasSubstr("name"));
  EXPECT_THAT(decode_event(R"({"timestamp":1,"name":""})").message(), HasSubstr("name"));
  EXPECT_THAT(decode_event(R"({"timestamp":1,"name":"x","context":[]})").message(),
              HasSubstr("context must be an object"));
}

TEST(EventlogTest, DecodesWholeLogSkippingBlankLines) {
  std::string text = encode_event({1, "submit", "{}"}) + "\n\n" + encode_event({2, "validate", "{}"}) + "\r\n  \n" +
                     encode_event({3, "depend", "{}"});
  auto events = decode_eventlog(text);
  ASSERT_TRUE(events.ok()) << events.message();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].name, "validate");
  EXPECT_EQ((*events)[2].timestamp, 3);
  EXPECT_TRUE(decode_eventlog("")->empty());
}

TEST(EventlogTest, BadLineIsNamedByNumber) {
  std::string text = encode_event({1, "submit", "{}"}) + "\n\n{broken\n";
  auto events = decode_eventlog(text);
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(events.message(), HasSubstr("line 3"));
}

TEST(EventlogTest, MakeEventUsesTheClock) {
  double before = now();
  Event ev = make_event("memo", R"({"x":1})");
  EXPECT_GE(ev.timestamp, before - 1e-6);
  EXPECT_LE(ev.timestamp, now() + 1e-6);
  EXPECT_EQ(ev.name, "memo");
  EXPECT_GT(before, 1.6e9);  // seconds since the epoch, not milliseconds
  EXPECT_LT(before, 1e11);
}

}  // namespace
}  // namespace corral::job
