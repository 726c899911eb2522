#include "limit/rate_headers.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "limit/http_date.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;
using Headers = std::vector<HttpHeader>;

// Tue, 14 Nov 2023 22:13:20 GMT (Unix time 1700000000) as our "now" unless a test says otherwise.
const TimePoint kNow = TimePoint(std::chrono::seconds(1'700'000'000));

PaceHint read(const Headers& h, int status = 200, TimePoint now = kNow, RateHeaderOptions o = {}) {
  return read_rate_headers(h, status, now, o);
}

TEST(HttpDate_Parse, ReadsAllThreeFormsAsTheSameInstant) {
  auto imf = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT");
  ASSERT_TRUE(imf);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), imf);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), imf);
  EXPECT_EQ(imf->time_since_epoch(), std::chrono::seconds(784111777));
}

TEST(HttpDate_Parse, RefusesGarbageAndImpossibleDates) {
  EXPECT_FALSE(parse_http_date(""));
  EXPECT_FALSE(parse_http_date("soon"));
  EXPECT_FALSE(parse_http_date("Sun, 31 Feb 1994 08:49:37 GMT"));
  EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 25:49:37 GMT"));
  EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT trailing"));
  EXPECT_FALSE(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"));
}

TEST(HttpDate_Parse, DatesOutsideTheClocksRangeAreReadAsSecondsNotTimePoints) {
  // A TimePoint (nanoseconds) holds 1677..2262; the seconds form holds every 4-digit year.
  EXPECT_FALSE(parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT"));
  EXPECT_FALSE(parse_http_date("Mon, 01 Jan 1000 00:00:00 GMT"));
  auto far = parse_http_date_seconds("Fri, 31 Dec 9999 23:59:59 GMT");
  ASSERT_TRUE(far);
  EXPECT_EQ(far->time_since_epoch().count(), 253402300799);
  EXPECT_TRUE(parse_http_date("Fri, 11 Apr 2262 00:00:00 GMT"));
}

TEST(RateHeaders_RetryAfter, DeltaSecondsSetsResumeTime) {
  auto h = read({{"Retry-After", "120"}}, 429);
  EXPECT_TRUE(h.throttled);
  EXPECT_EQ(h.source, HintSource::kRetryAfter);
  EXPECT_EQ(h.resume_at, kNow + 120s);
}

TEST(RateHeaders_RetryAfter, HeaderNamesAreCaseInsensitive) {
  EXPECT_EQ(read({{"retry-after", "3"}}, 429).resume_at, kNow + 3s);
  EXPECT_EQ(read({{"RETRY-AFTER", "3"}}, 429).resume_at, kNow + 3s);
}

TEST(RateHeaders_RetryAfter, HttpDateIsReadAgainstTheServersDateHeader) {
  // The server's clock is 1 hour ahead of ours; it asks for 30 s.
  const TimePoint our_now = kNow - 1h;
  auto h = read({{"Date", "Tue, 14 Nov 2023 22:13:20 GMT"}, {"Retry-After", "Tue, 14 Nov 2023 22:13:50 GMT"}},
                429, our_now);
  EXPECT_EQ(h.resume_at, our_now + 30s);
}

TEST(RateHeaders_RetryAfter, HttpDateWithoutDateHeaderIsReadAgainstOurClock) {
  auto h = read({{"Retry-After", "Tue, 14 Nov 2023 22:13:50 GMT"}}, 503);
  EXPECT_EQ(h.resume_at, kNow + 30s);
  EXPECT_TRUE(h.throttled);  // 503 with Retry-After is the server asking for a pause
}

TEST(RateHeaders_RetryAfter, GarbageIsIgnoredAndNamed) {
  for (const char* bad : {"soon", "-5", "1e3", "", "12abc", "99999999999999999999999999999"}) {
    auto h = read({{"Retry-After", bad}}, 429);
    EXPECT_FALSE(h.resume_at) << bad;
    EXPECT_EQ(h.source, HintSource::kBareThrottle) << bad;
    ASSERT_EQ(h.ignored.size(), 1u) << bad;
    EXPECT_NE(h.ignored[0].find("Retry-After"), std::string::npos);
  }
}

TEST(RateHeaders_RetryAfter, AbsurdWaitIsClampedAndReported) {
  RateHeaderOptions o;
  o.max_wait = 1h;
  auto h = read({{"Retry-After", "999999999"}}, 429, kNow, o);
  EXPECT_EQ(h.resume_at, kNow + 1h);
  ASSERT_TRUE(h.clamped);
  EXPECT_NE(h.clamped->find("Retry-After"), std::string::npos);
}

// Waits beyond what a nanosecond clock holds (about 292 years) are cut to
// max_wait before they become durations, and the cut is reported for the log.
TEST(RateHeaders_RetryAfter, DeltaSecondsBeyondTheClocksRangeAreCappedAndReported) {
  for (const char* huge : {"10000000000", "99999999999", "9999999999999", "99999999999999999999"}) {
    auto h = read({{"Retry-After", huge}}, 429);
    EXPECT_EQ(h.resume_at, kNow + 1h) << huge;
    ASSERT_TRUE(h.clamped) << huge;
    EXPECT_NE(h.clamped->find(std::string("Retry-After: ") + huge), std::string::npos) << *h.clamped;
    EXPECT_NE(h.clamped->find("waiting 1h"), std::string::npos) << *h.clamped;
  }
}

TEST(RateHeaders_RetryAfter, HttpDateAfterTheClocksRangeIsCappedAndReported) {
  for (const char* date :
       {"Sat, 12 Apr 2262 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Fri Dec 31 23:59:59 9999"}) {
    auto h = read({{"Retry-After", date}}, 429);
    EXPECT_EQ(h.resume_at, kNow + 1h) << date;
    ASSERT_TRUE(h.clamped) << date;
    EXPECT_NE(h.clamped->find("Retry-After"), std::string::npos) << *h.clamped;
  }
}

TEST(RateHeaders_RetryAfter, HttpDateBeforeTheClocksRangeMeansNoWait) {
  auto h = read({{"Retry-After", "Mon, 01 Jan 1000 00:00:00 GMT"}}, 429);
  EXPECT_EQ(h.resume_at, kNow);
  EXPECT_FALSE(h.clamped);
}

TEST(RateHeaders_Date, ADateHeaderFarFromOurClockStillGivesABoundedWait) {
  // A server whose clock says 9999 asks for a date 30 s after its own now.
  auto h = read({{"Date", "Fri, 31 Dec 9999 23:59:00 GMT"}, {"Retry-After", "Fri, 31 Dec 9999 23:59:30 GMT"}},
                429);
  EXPECT_EQ(h.resume_at, kNow + 30s);
  // One in 1000 asks for a date in 2100, far ahead of its clock.
  auto g = read({{"Date", "Mon, 01 Jan 1000 00:00:00 GMT"}, {"Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT"}},
                429);
  EXPECT_EQ(g.resume_at, kNow + 1h);
  EXPECT_TRUE(g.clamped);
}

TEST(RateHeaders_RetryAfter, DateInThePastMeansNoWait) {
  auto h = read({{"Retry-After", "Tue, 14 Nov 2023 22:00:00 GMT"}}, 429);
  EXPECT_EQ(h.resume_at, kNow);
}

TEST(RateHeaders_XRateLimit, ResetAsDeltaSecondsWithNothingRemainingPauses) {
  auto h = read({{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "30"}});
  EXPECT_EQ(h.source, HintSource::kXRateLimit);
  EXPECT_EQ(h.resume_at, kNow + 30s);
  EXPECT_EQ(h.limit, 100);
  EXPECT_EQ(h.remaining, 0);
}

TEST(RateHeaders_XRateLimit, ResetAsUnixTimeIsDetectedAndReadAgainstDate) {
  const auto server_now = std::chrono::duration_cast<std::chrono::seconds>(kNow.time_since_epoch()).count();
  const TimePoint our_now = kNow + 10min;  // our clock is 10 minutes ahead of the server's
  auto h = read({{"Date", "Tue, 14 Nov 2023 22:13:20 GMT"},
                 {"X-RateLimit-Remaining", "0"},
                 {"X-RateLimit-Reset", std::to_string(server_now + 45)}},
                200, our_now);
  EXPECT_EQ(h.resume_at, our_now + 45s);
}

TEST(RateHeaders_XRateLimit, ResetAsUnixMillisecondsIsDetected) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(kNow.time_since_epoch()).count();
  auto h = read({{"Date", "Tue, 14 Nov 2023 22:13:20 GMT"},
                 {"X-RateLimit-Remaining", "0"},
                 {"X-RateLimit-Reset", std::to_string(ms + 2500)}});
  EXPECT_EQ(h.resume_at, kNow + 2500ms);
}

TEST(RateHeaders_XRateLimit, AnAbsoluteResetIsAlsoKeptAsTheServerWroteIt) {
  const auto server_now = std::chrono::duration_cast<std::chrono::seconds>(kNow.time_since_epoch()).count();
  auto h = read({{"Date", "Tue, 14 Nov 2023 22:13:20 GMT"},
                 {"X-RateLimit-Limit", "10"},
                 {"X-RateLimit-Remaining", "4"},
                 {"X-RateLimit-Reset", std::to_string(server_now + 3)}});
  EXPECT_EQ(h.reset_epoch_ms, (server_now + 3) * 1000);
  EXPECT_EQ(h.reset_in, 3s);
  auto delta = read({{"X-RateLimit-Remaining", "4"}, {"X-RateLimit-Reset", "3"}});
  EXPECT_FALSE(delta.reset_epoch_ms) << "a delta says nothing of where the server's windows lie";
}

TEST(RateHeaders_XRateLimit, ResetInThePastMeansNoWait) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(kNow.time_since_epoch()).count();
  auto h = read({{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", std::to_string(s - 100)}});
  EXPECT_EQ(h.resume_at, kNow);
  EXPECT_FALSE(h.clamped);
}

TEST(RateHeaders_XRateLimit, ResetYearsAheadIsCappedAtMaxWait) {
  RateHeaderOptions o;
  o.max_wait = 15min;
  auto h = read({{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "4102444800"}}, 200, kNow, o);  // 2100
  EXPECT_EQ(h.resume_at, kNow + 15min);
  ASSERT_TRUE(h.clamped);
  EXPECT_NE(h.clamped->find("X-RateLimit-Reset"), std::string::npos);
}

// A wait is capped at max_wait, a day by default; a reset with calls
// remaining is a span to pace them over, capped at an hour: spread over a
// day, calls the server would take now came minutes apart.
TEST(RateHeaders_XRateLimit, ResetYearsAheadWithCallsRemaining_PacedOverAnHourAtMost) {
  RateHeaderOptions o;
  o.max_wait = 24h;
  auto h = read({{"X-RateLimit-Remaining", "100"}, {"X-RateLimit-Reset", "4102444800"}}, 200, kNow, o);
  EXPECT_FALSE(h.resume_at);
  EXPECT_EQ(h.reset_in, 1h);
  EXPECT_EQ(h.interval, 36s);
  ASSERT_TRUE(h.clamped);
  EXPECT_NE(h.clamped->find("X-RateLimit-Reset: 4102444800"), std::string::npos) << *h.clamped;
  EXPECT_NE(h.clamped->find("pacing them over 1h"), std::string::npos) << *h.clamped;
  // Nothing remaining, the same reset is a wait, capped at max_wait.
  auto spent = read({{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "4102444800"}}, 200, kNow, o);
  EXPECT_EQ(spent.resume_at, kNow + 24h);
}

// A server with no clock of its own says 1970 in Date, and its reset is a
// true Unix time 5 s ahead: read against the Date, it was 56 years ahead,
// a wait capped at max_wait.
TEST(RateHeaders_XRateLimit, DateDecadesOffAndAResetSoon_ReadAgainstOurClock) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(kNow.time_since_epoch()).count();
  auto h = read({{"Date", "Thu, 01 Jan 1970 00:00:00 GMT"},
                 {"X-RateLimit-Remaining", "0"},
                 {"X-RateLimit-Reset", std::to_string(s + 5)}});
  EXPECT_EQ(h.resume_at, kNow + 5s);
  EXPECT_FALSE(h.clamped);
  ASSERT_EQ(h.ignored.size(), 1u);
  EXPECT_NE(h.ignored[0].find("Date: Thu, 01 Jan 1970 00:00:00 GMT (53y from our clock"), std::string::npos)
      << h.ignored[0];
  // A Retry-After date likewise.
  auto r =
      read({{"Date", "Thu, 01 Jan 1970 00:00:00 GMT"}, {"Retry-After", "Tue, 14 Nov 2023 22:13:27 GMT"}});
  EXPECT_EQ(r.resume_at, kNow + 7s);
  // A server whose clock is off by minutes still has its times read on it.
  auto skewed = read({{"Date", "Tue, 14 Nov 2023 22:08:20 GMT"},
                      {"X-RateLimit-Remaining", "0"},
                      {"X-RateLimit-Reset", std::to_string(s - 300 + 5)}});
  EXPECT_EQ(skewed.resume_at, kNow + 5s);
  EXPECT_TRUE(skewed.ignored.empty());
}

TEST(RateHeaders_XRateLimit, ResetBeyondTheClocksRangeIsCappedAndReported) {
  // 1e11 reads as Unix seconds (year 5138), 1e20 as Unix milliseconds.
  for (const char* huge : {"100000000000", "100000000000000000000", "999999999999999999999999"}) {
    auto h = read({{"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", huge}});
    EXPECT_EQ(h.resume_at, kNow + 1h) << huge;
    ASSERT_TRUE(h.clamped) << huge;
    EXPECT_NE(h.clamped->find(std::string("X-RateLimit-Reset: ") + huge), std::string::npos) << *h.clamped;
  }
}

TEST(RateHeaders_Ietf, ResetBeyondTheClocksRangeIsCappedAndReported) {
  auto h = read({{"RateLimit", "\"default\";r=0;t=99999999999"}});
  EXPECT_EQ(h.resume_at, kNow + 1h);
  EXPECT_TRUE(h.clamped);
  auto g = read({{"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "10000000000"}});
  EXPECT_EQ(g.resume_at, kNow + 1h);
  EXPECT_TRUE(g.clamped);
}

TEST(RateHeaders_Ietf, PolicyWindowBeyondTheClocksRangeIsCappedAndReported) {
  auto h = read({{"RateLimit-Policy", "10;w=99999999999"}});
  EXPECT_EQ(h.interval, 1h);  // one call per max_wait at the slowest
  EXPECT_EQ(h.limit, 10);
  ASSERT_TRUE(h.window);
  EXPECT_EQ(*h.window, std::chrono::hours(24 * 365));
  ASSERT_TRUE(h.clamped);
  EXPECT_NE(h.clamped->find("RateLimit-Policy"), std::string::npos) << *h.clamped;
}

TEST(RateHeaders_XRateLimit, RemainingQuotaIsSpreadOverTheResetTime) {
  auto h = read({{"X-RateLimit-Remaining", "4"}, {"X-RateLimit-Reset", "2"}});
  EXPECT_FALSE(h.resume_at);
  EXPECT_EQ(h.interval, 500ms);
}

TEST(RateHeaders_XRateLimit, GarbageValuesAreIgnored) {
  auto h = read(
      {{"X-RateLimit-Remaining", "lots"}, {"X-RateLimit-Reset", "tomorrow"}, {"X-RateLimit-Limit", "-1"}});
  EXPECT_FALSE(h.resume_at);
  EXPECT_FALSE(h.interval);
  EXPECT_EQ(h.ignored.size(), 3u);
}

TEST(RateHeaders_Ietf, DictionaryForm) {
  auto h = read({{"RateLimit", "limit=10, remaining=0, reset=5"}});
  EXPECT_EQ(h.source, HintSource::kIetfRateLimit);
  EXPECT_EQ(h.resume_at, kNow + 5s);
  EXPECT_EQ(h.limit, 10);
}

TEST(RateHeaders_Ietf, StructuredListFormPicksTheTightestPolicy) {
  auto h = read({{"RateLimit", "\"burst\";r=50;t=1, \"daily\";r=0;t=3600"}});
  EXPECT_EQ(h.resume_at, kNow + 3600s);
  auto g = read({{"RateLimit", "\"default\";r=3;t=6"}});
  EXPECT_FALSE(g.resume_at);
  EXPECT_EQ(g.interval, 2s);
}

TEST(RateHeaders_Ietf, SeparateHeadersOfEarlyDrafts) {
  auto h = read({{"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "7"}});
  EXPECT_EQ(h.source, HintSource::kIetfRateLimit);
  EXPECT_EQ(h.resume_at, kNow + 7s);
}

TEST(RateHeaders_Ietf, PolicyGivesThePaceAndWindow) {
  auto h = read({{"RateLimit-Policy", "10;w=1"}});
  EXPECT_EQ(h.interval, 100ms);
  EXPECT_EQ(h.limit, 10);
  EXPECT_EQ(h.window, 1s);
  auto g = read({{"RateLimit-Policy", "\"default\";q=100;w=60, \"burst\";q=10;w=1"}});
  EXPECT_EQ(g.interval, 600ms);  // 100 per minute is the tighter pace
}

TEST(RateHeaders_Ietf, MalformedValuesNeverThrowAndAreNamed) {
  for (const char* bad : {"", ";;;", "limit=", "\"x\";r=abc;t=", "=,=,=", "\"unterminated"}) {
    auto h = read({{"RateLimit", bad}, {"RateLimit-Policy", bad}}, 429);
    EXPECT_FALSE(h.resume_at) << bad;
    EXPECT_FALSE(h.interval) << bad;
    EXPECT_TRUE(h.throttled);
  }
}

TEST(RateHeaders_Precedence, RetryAfterWinsOverResetHeaders) {
  auto h = read({{"Retry-After", "10"},
                 {"X-RateLimit-Remaining", "0"},
                 {"X-RateLimit-Reset", "60"},
                 {"RateLimit", "limit=10, remaining=0, reset=30"}},
                429);
  EXPECT_EQ(h.source, HintSource::kRetryAfter);
  EXPECT_EQ(h.resume_at, kNow + 10s);
}

TEST(RateHeaders_Precedence, IetfWinsOverXRateLimit) {
  auto h = read({{"X-RateLimit-Remaining", "0"},
                 {"X-RateLimit-Reset", "60"},
                 {"RateLimit", "limit=10, remaining=0, reset=30"}});
  EXPECT_EQ(h.source, HintSource::kIetfRateLimit);
  EXPECT_EQ(h.resume_at, kNow + 30s);
}

TEST(RateHeaders_Bare, A429WithoutHeadersIsABareThrottle) {
  auto h = read({}, 429);
  EXPECT_TRUE(h.throttled);
  EXPECT_EQ(h.source, HintSource::kBareThrottle);
  EXPECT_FALSE(h.resume_at);
}

TEST(RateHeaders_Bare, ASuccessWithoutHeadersSaysNothing) {
  EXPECT_TRUE(read({{"Content-Type", "application/json"}}, 200).empty());
}

TEST(RateHeaders_Date, GarbageDateFallsBackToOurClock) {
  auto h = read({{"Date", "yesterday"}, {"Retry-After", "Tue, 14 Nov 2023 22:14:20 GMT"}}, 429);
  EXPECT_EQ(h.resume_at, kNow + 60s);
  EXPECT_EQ(h.ignored.size(), 1u);
}

}  // namespace
}  // namespace ratchet::limit
