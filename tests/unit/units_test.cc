#include "util/units.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/rounding.h"

namespace corral {
namespace {

using ::testing::HasSubstr;

double duration(std::string_view text) {
  auto d = parse_duration(text);
  EXPECT_TRUE(d.ok()) << text << ": " << (d.ok() ? "" : d.message());
  return d.ok() ? *d : -1;
}

double time_limit(std::string_view text) {
  auto d = parse_time_limit(text);
  EXPECT_TRUE(d.ok()) << text << ": " << (d.ok() ? "" : d.message());
  return d.ok() ? *d : -1;
}

uint64_t bytes_of(std::string_view text) {
  auto s = parse_size(text);
  EXPECT_TRUE(s.ok()) << text << ": " << (s.ok() ? "" : s.message());
  return s.ok() ? *s : 0;
}

TEST(Duration, FluxStandardDuration) {
  EXPECT_DOUBLE_EQ(duration("30s"), 30);
  EXPECT_DOUBLE_EQ(duration("5m"), 300);
  EXPECT_DOUBLE_EQ(duration("1.5h"), 5400);
  EXPECT_DOUBLE_EQ(duration("2d"), 172800);
  EXPECT_DOUBLE_EQ(duration("0.5ms"), 0.0005);
  EXPECT_DOUBLE_EQ(duration("42"), 42);
  EXPECT_DOUBLE_EQ(duration(".5m"), 30);
  EXPECT_DOUBLE_EQ(duration(" 10s "), 10);
  EXPECT_DOUBLE_EQ(duration("0"), 0);
  EXPECT_DOUBLE_EQ(duration("inf"), 0);
  EXPECT_DOUBLE_EQ(duration("infinity"), 0);
  EXPECT_DOUBLE_EQ(duration("UNLIMITED"), 0);
}

TEST(Duration, RejectsBadInput) {
  EXPECT_THAT(parse_duration("").message(), HasSubstr("invalid duration"));
  EXPECT_THAT(parse_duration("5x").message(), HasSubstr("unknown unit \"x\""));
  EXPECT_THAT(parse_duration("5sec").message(), HasSubstr("unknown unit \"sec\""));
  EXPECT_THAT(parse_duration("-5s").message(), HasSubstr("\"-5\" is not a non-negative number"));
  EXPECT_THAT(parse_duration("h").message(), HasSubstr("\"\" is not"));
  EXPECT_THAT(parse_duration("1.2.3s").message(), HasSubstr("\"1.2.3\""));
  EXPECT_FALSE(parse_duration("nan").ok());
  EXPECT_FALSE(parse_duration("1e999").ok());
}

TEST(TimeLimit, SlurmForms) {
  EXPECT_DOUBLE_EQ(time_limit("30"), 30 * 60);                                  // MM
  EXPECT_DOUBLE_EQ(time_limit("90"), 90 * 60);                                  // MM may exceed 59
  EXPECT_DOUBLE_EQ(time_limit("5:30"), 5 * 60 + 30);                            // MM:SS
  EXPECT_DOUBLE_EQ(time_limit("1:30:00"), 5400);                                // HH:MM:SS
  EXPECT_DOUBLE_EQ(time_limit("2-12"), 2 * 86400 + 12 * 3600);                  // D-HH
  EXPECT_DOUBLE_EQ(time_limit("1-02:30"), 86400 + 2 * 3600 + 30 * 60);          // D-HH:MM
  EXPECT_DOUBLE_EQ(time_limit("1-02:30:15"), 86400 + 2 * 3600 + 30 * 60 + 15);  // D-HH:MM:SS
  EXPECT_DOUBLE_EQ(time_limit("UNLIMITED"), 0);
  EXPECT_DOUBLE_EQ(time_limit("infinite"), 0);
  EXPECT_DOUBLE_EQ(time_limit("1.5h"), 5400);  // unit suffix: FSD
  EXPECT_DOUBLE_EQ(time_limit("45s"), 45);
}

TEST(TimeLimit, RejectsBadInput) {
  EXPECT_THAT(parse_time_limit("1:75:00").message(), HasSubstr("minutes 75 must be below 60"));
  EXPECT_THAT(parse_time_limit("5:60").message(), HasSubstr("seconds 60"));
  EXPECT_THAT(parse_time_limit("1-25").message(), HasSubstr("hours 25"));
  EXPECT_THAT(parse_time_limit("1:2:3:4").message(), HasSubstr("expected MM"));
  EXPECT_THAT(parse_time_limit("1-").message(), HasSubstr("invalid time limit \"1-\""));
  EXPECT_FALSE(parse_time_limit("-5").ok());
  EXPECT_FALSE(parse_time_limit("1::2").ok());
  EXPECT_FALSE(parse_time_limit("").ok());
  EXPECT_FALSE(parse_time_limit("5y").ok());
}

TEST(Duration, FormatShortestExact) {
  EXPECT_EQ(format_duration(90), "1.5m");
  EXPECT_EQ(format_duration(30), "30s");
  EXPECT_EQ(format_duration(5400), "1.5h");
  EXPECT_EQ(format_duration(172800), "2d");
  EXPECT_EQ(format_duration(3600), "1h");
  EXPECT_EQ(format_duration(3601), "3601s");
  EXPECT_EQ(format_duration(3660), "61m");
  EXPECT_EQ(format_duration(0.5), "500ms");
  EXPECT_EQ(format_duration(0.0015), "1.5ms");
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "inf");
  for (double s : {1.0, 59.0, 61.0, 90.0, 7200.5, 86400.0 * 3.25, 0.25, 123456.0}) {
    EXPECT_DOUBLE_EQ(duration(format_duration(s)), s) << format_duration(s);
  }
}

TEST(Duration, FormatElapsedLikeSqueue) {
  EXPECT_EQ(format_elapsed(0), "0:00");
  EXPECT_EQ(format_elapsed(65.9), "1:05");
  EXPECT_EQ(format_elapsed(5400), "1:30:00");
  EXPECT_EQ(format_elapsed(172800), "2-00:00:00");
  EXPECT_EQ(format_elapsed(86400 + 3661), "1-01:01:01");
  EXPECT_EQ(format_elapsed(-3), "0:00");
}

TEST(Size, Parse) {
  EXPECT_EQ(bytes_of("1024"), 1024u);
  EXPECT_EQ(bytes_of("512B"), 512u);
  EXPECT_EQ(bytes_of("10K"), 10240u);
  EXPECT_EQ(bytes_of("10KB"), 10000u);
  EXPECT_EQ(bytes_of("10KiB"), 10240u);
  EXPECT_EQ(bytes_of("10kib"), 10240u);
  EXPECT_EQ(bytes_of("10GiB"), 10ull << 30);
  EXPECT_EQ(bytes_of("10G"), 10ull << 30);
  EXPECT_EQ(bytes_of("1TB"), 1'000'000'000'000u);
  EXPECT_EQ(bytes_of("1tb"), 1'000'000'000'000u);
  EXPECT_EQ(bytes_of("2P"), 2ull << 50);
  EXPECT_EQ(bytes_of("1.5MiB"), 1572864u);
  EXPECT_EQ(bytes_of("4 GB"), 4'000'000'000u);
  EXPECT_EQ(bytes_of("18446744073709551615"), std::numeric_limits<uint64_t>::max());
}

TEST(Size, DefaultUnitForBareNumbers) {
  EXPECT_EQ(*parse_size("100", 1 << 20), 100u << 20);  // Slurm --mem=100 is MiB
  EXPECT_EQ(*parse_size("2G", 1 << 20), 2ull << 30);
}

TEST(Size, RejectsBadInput) {
  EXPECT_THAT(parse_size("").message(), HasSubstr("invalid size"));
  EXPECT_THAT(parse_size("10X").message(), HasSubstr("unknown unit \"X\""));
  EXPECT_THAT(parse_size("10KiBB").message(), HasSubstr("unknown unit"));
  EXPECT_THAT(parse_size("-1G").message(), HasSubstr("unknown unit \"-1G\""));
  EXPECT_THAT(parse_size("GiB").message(), HasSubstr("\"\" is not a non-negative number"));
  EXPECT_THAT(parse_size("1.2.3G").message(), HasSubstr("\"1.2.3\""));
  EXPECT_THAT(parse_size("16EiB").message(), HasSubstr("larger than 16 EiB"));
  EXPECT_THAT(parse_size("18446744073709551616").message(), HasSubstr("larger than 16 EiB"));
}

TEST(Size, Format) {
  EXPECT_EQ(format_size(10ull << 30), "10GiB");
  EXPECT_EQ(format_size(1572864), "1.5MiB");
  EXPECT_EQ(format_size(512), "512B");
  EXPECT_EQ(format_size(0), "0B");
  EXPECT_EQ(format_size(1024), "1KiB");
  EXPECT_EQ(format_size(1000), "1KB");
  EXPECT_EQ(format_size(1'000'000'000'000), "1TB");
  EXPECT_EQ(format_size(1288490189), "1288490189B");  // 1.2GiB is not exact
  EXPECT_EQ(format_size(1181116006), "1181116006B");
  EXPECT_EQ(format_size(2684354560), "2.5GiB");
  EXPECT_EQ(format_size(1342177280), "1.25GiB");
  EXPECT_EQ(format_size(1536), "1.5KiB");
  EXPECT_EQ(format_size(1'000'000), "1MB");
  for (uint64_t b : {1ull, 1023ull, 1536ull, 1000000ull, 3ull << 40, 123456789ull}) {
    EXPECT_EQ(bytes_of(format_size(b)), b) << format_size(b);
  }
}

// round_nearest stands in for std::round so that the corral command links no libm.
TEST(Rounding, SameAsStdRound) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double halves[] = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1e300, -1e300, kInf, -kInf};
  const double edges[] = {0.49999999999999994,
                          -0.49999999999999994,
                          4503599627370495.5,
                          -4503599627370495.5,
                          4503599627370496.0,
                          9007199254740993.0,
                          std::numeric_limits<double>::denorm_min()};
  auto same = [](double x) {
    EXPECT_EQ(round_nearest(x), std::round(x)) << x;
    EXPECT_EQ(std::signbit(round_nearest(x)), std::signbit(std::round(x))) << x;
  };
  for (double x : halves) same(x);
  for (double x : edges) same(x);
  EXPECT_TRUE(std::isnan(round_nearest(std::nan(""))));
  for (int i = -20000; i <= 20000; ++i) {
    same(i * 0.0625 + i * 1e-7);
  }
  EXPECT_EQ(round_to_long(59999.5), 60000);
  EXPECT_EQ(round_to_long(-2.5), -3);
  EXPECT_EQ(round_to_long(1e300), std::numeric_limits<long>::max());
  EXPECT_EQ(round_to_long(-1e300), std::numeric_limits<long>::min());
  EXPECT_EQ(round_to_long(std::nan("")), std::numeric_limits<long>::min());
}

}  // namespace
}  // namespace corral
