#include "common/duration.hpp"

#include <gtest/gtest.h>

namespace ratchet::common {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration_Units, ReadEveryUnit) {
  EXPECT_EQ(parse_duration("250ms").value(), 250ms);
  EXPECT_EQ(parse_duration("10s").value(), 10s);
  EXPECT_EQ(parse_duration("5m").value(), 5min);
  EXPECT_EQ(parse_duration("1h").value(), 1h);
  EXPECT_EQ(parse_duration("1d").value(), 24h);
  EXPECT_EQ(parse_duration("75us").value(), 75us);
}

TEST(ParseDuration_Compound, AddsParts) {
  EXPECT_EQ(parse_duration("1h30m").value(), 90min);
  EXPECT_EQ(parse_duration("1.5s").value(), 1500ms);
}

TEST(ParseDuration_BadInput, IsRefusedWithAHint) {
  for (const char* text : {"", "10", "ms", "10x", "1..5s", "-1s", "10 s"}) {
    auto r = parse_duration(text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("250ms"), std::string::npos) << r.error().message();
  }
}

TEST(ParseDuration_TooLong, ADurationNoClockCanAddIsRefusedNamingTheBound) {
  // A clock Duration (nanoseconds) holds about 292 years; longer values
  // overflowed every conversion and every addition to a time.
  for (const char* text : {"200000d", "36501d", "9999999999999999d", "100000d1s"}) {
    auto r = parse_duration(text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_NE(r.error().message().find("at most 36500d"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(parse_duration("36500d").value(), std::chrono::hours(24 * 36500));
}

TEST(FormatDuration_RoundTrip, ParsesBackToTheSameValue) {
  for (auto d : {0us, 1us, 250'000us, 1'000'000us, 5'400'000'000us, 86'401'500'000us}) {
    std::string text = format_duration(d);
    EXPECT_EQ(parse_duration(text).value(), d) << text;
  }
  EXPECT_EQ(format_duration(90min), "1h30m");
  EXPECT_EQ(format_duration(250ms), "250ms");
}

}  // namespace
}  // namespace ratchet::common
