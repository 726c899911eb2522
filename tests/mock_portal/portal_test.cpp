// The mock portal's rate-limit dialects, fault injection and counting, on a
// fake clock.
#include "mock_portal/portal.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "mock_portal/http_date.hpp"

namespace ratchet::mock_portal {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> header(const Answer& a, std::string_view name) {
  for (const auto& [k, v] : a.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

class PortalTest : public ::testing::Test {
 protected:
  // The fake clock starts on a whole second, so windows of 1 s start now.
  FakeClock clock_;
  std::int64_t unix_now() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.now().time_since_epoch()).count();
  }
};

TEST_F(PortalTest, FixedWindow_OverLimit_429UntilNextWindow) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 3, .window = 1s}, 1);
  for (int i = 0; i < 3; ++i) {
    const auto a = p.handle("Up", clock_);
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(header(a, "X-RateLimit-Limit"), "3");
    EXPECT_EQ(header(a, "X-RateLimit-Remaining"), std::to_string(2 - i));
    EXPECT_EQ(header(a, "X-RateLimit-Reset"), std::to_string(unix_now() + 1));
  }
  clock_.advance(999ms);
  const auto over = p.handle("Up", clock_);
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(header(over, "X-RateLimit-Remaining"), "0");
  clock_.advance(1ms);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  const auto s = p.stats();
  EXPECT_EQ(s.requests, 5);
  EXPECT_EQ(s.ok, 4);
  EXPECT_EQ(s.throttled, 1);
}

TEST_F(PortalTest, FixedWindow_WindowsAlignedToEpoch_ResetIsWindowEnd) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 100, .window = 60s}, 1);
  clock_.advance(10s);  // the minute started 10 s ago
  EXPECT_EQ(header(p.handle("Up", clock_), "X-RateLimit-Reset"), std::to_string(unix_now() + 50));
}

TEST_F(PortalTest, FixedWindow_Offset_WindowsStartThatLongAfterTheSecond) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 2, .window = 1s, .window_offset = 300ms}, 1);
  clock_.advance(100ms);  // 0.1 s into the clock's second: in the window that began at -0.7 s
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
  clock_.advance(199ms);  // 0.299 s: still that window
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
  clock_.advance(1ms);  // 0.3 s: a new window, although the clock's second did not change
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.stats().max_in_aligned_window, 4) << "the server's own windows are the aligned ones";
}

TEST_F(PortalTest, RetryAfter429_OverLimit_OnlyRetryAfterUntilTheWindowEnds) {
  Portal p("imdb", {.dialect = Dialect::kRetryAfter, .limit = 1, .window = 10s}, 1);
  const auto ok = p.handle("Up", clock_);
  EXPECT_EQ(ok.status, 200);
  EXPECT_TRUE(ok.headers.empty()) << "admitted answers say nothing of the limit";
  clock_.advance(2500ms);
  const auto over = p.handle("Up", clock_);
  EXPECT_EQ(over.status, 429);
  ASSERT_EQ(over.headers.size(), 1u);
  EXPECT_EQ(header(over, "Retry-After"), "8") << "7.5 s to the window's end, rounded up";
  clock_.advance(7500ms);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
}

TEST_F(PortalTest, Stats_FirstAndLastArrival) {
  Portal p("imdb", {}, 1);
  const auto t0 = clock_.now();
  EXPECT_EQ(p.stats().first_arrival, TimePoint{});
  (void)p.handle("Up", clock_);
  clock_.advance(1500ms);
  (void)p.handle("Up", clock_);
  EXPECT_EQ(p.stats().first_arrival, t0);
  EXPECT_EQ(p.stats().last_arrival, t0 + 1500ms);
}

TEST_F(PortalTest, FixedWindow_DeltaStyle_ResetIsSecondsRoundedUp) {
  Portal p(
      "imdb",
      {.dialect = Dialect::kFixedWindow, .limit = 5, .window = 10s, .reset_style = ResetStyle::kDeltaSeconds},
      1);
  clock_.advance(2500ms);
  EXPECT_EQ(header(p.handle("Up", clock_), "X-RateLimit-Reset"), "8");
}

TEST_F(PortalTest, FixedWindow_DateSkew_ShiftsUnixReset) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 5, .window = 1s, .date_skew = -30s}, 1);
  EXPECT_EQ(header(p.handle("Up", clock_), "X-RateLimit-Reset"), std::to_string(unix_now() + 1 - 30));
}

TEST_F(PortalTest, TokenBucket_Empty_RetryAfterIsSecondsUntilOneToken) {
  // 2 per 10 s: one token every 5 s.
  Portal p("netflix", {.dialect = Dialect::kTokenBucket, .limit = 2, .window = 10s}, 1);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  const auto empty = p.handle("Up", clock_);
  EXPECT_EQ(empty.status, 429);
  EXPECT_EQ(header(empty, "Retry-After"), "5");
  clock_.advance(3s);
  EXPECT_EQ(header(p.handle("Up", clock_), "Retry-After"), "2");
  clock_.advance(2s);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
}

TEST_F(PortalTest, TokenBucket_SubSecondWait_RetryAfterAtLeastOne) {
  Portal p("netflix", {.dialect = Dialect::kTokenBucket, .limit = 10, .window = 200ms}, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(header(p.handle("Up", clock_), "Retry-After"), "1");
  clock_.advance(20ms);  // exactly one token back
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
}

TEST_F(PortalTest, TokenBucket_Burst_AllowsThatManyAtOnce) {
  Portal p("netflix", {.dialect = Dialect::kTokenBucket, .limit = 10, .window = 1s, .burst = 3}, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
}

TEST_F(PortalTest, TokenBucket_HttpDateStyle_RetryAfterIsDateOfNextToken) {
  Portal p("netflix",
           {.dialect = Dialect::kTokenBucket,
            .limit = 1,
            .window = 4s,
            .retry_after_style = RetryAfterStyle::kHttpDate,
            .date_skew = 60s},
           1);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_EQ(header(p.handle("Up", clock_), "Retry-After"), format_http_date(clock_.now() + 60s + 4s));
}

TEST_F(PortalTest, Ietf_EveryAnswer_CarriesRateLimitAndPolicy) {
  Portal p("sify", {.dialect = Dialect::kIetf, .limit = 2, .window = 200ms}, 1);
  const auto a = p.handle("Up", clock_);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(header(a, "RateLimit"), "limit=2, remaining=1, reset=1");
  EXPECT_EQ(header(a, "RateLimit-Policy"), "2;w=1");
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
  const auto over = p.handle("Up", clock_);
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(header(over, "RateLimit"), "limit=2, remaining=0, reset=1");
  clock_.advance(200ms);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
}

TEST_F(PortalTest, Ietf_LongWindow_PolicyAndResetInSeconds) {
  Portal p("sify", {.dialect = Dialect::kIetf, .limit = 100, .window = 60s}, 1);
  clock_.advance(45s);
  const auto a = p.handle("Up", clock_);
  EXPECT_EQ(header(a, "RateLimit"), "limit=100, remaining=99, reset=15");
  EXPECT_EQ(header(a, "RateLimit-Policy"), "100;w=60");
}

TEST_F(PortalTest, Bare429_OverLimit_NoHeadersAtAll) {
  Portal p("amazon_prime", {.dialect = Dialect::kBare429, .limit = 1, .window = 1s}, 1);
  const auto ok = p.handle("Up", clock_);
  const auto over = p.handle("Up", clock_);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(over.status, 429);
  EXPECT_TRUE(ok.headers.empty());
  EXPECT_TRUE(over.headers.empty());
}

TEST_F(PortalTest, None_ManyRequests_NeverLimited) {
  Portal p("imdb", {}, 1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p.handle("Up", clock_).status, 200);
  EXPECT_TRUE(p.handle("Up", clock_).headers.empty());
}

TEST_F(PortalTest, MalformedHeaders_Garbage_UnparseableValues) {
  Portal fixed("imdb", {.dialect = Dialect::kFixedWindow, .malformed_headers = MalformedHeaders::kGarbage},
               1);
  EXPECT_EQ(header(fixed.handle("Up", clock_), "X-RateLimit-Reset"), "tomorrow");
  Portal bucket(
      "imdb", {.dialect = Dialect::kTokenBucket, .limit = 1, .malformed_headers = MalformedHeaders::kGarbage},
      1);
  bucket.handle("Up", clock_);
  EXPECT_EQ(header(bucket.handle("Up", clock_), "Retry-After"), "soon-ish");
  Portal ietf("imdb", {.dialect = Dialect::kIetf, .malformed_headers = MalformedHeaders::kGarbage}, 1);
  EXPECT_EQ(header(ietf.handle("Up", clock_), "RateLimit"), "limit=ten, remaining=?, reset=later");
}

TEST_F(PortalTest, MalformedHeaders_PastAndFarFuture_ResetsOutOfRange) {
  Portal past("imdb", {.dialect = Dialect::kFixedWindow, .malformed_headers = MalformedHeaders::kPast}, 1);
  EXPECT_EQ(header(past.handle("Up", clock_), "X-RateLimit-Reset"), std::to_string(unix_now() - 3600));
  Portal future("imdb", {.dialect = Dialect::kFixedWindow, .malformed_headers = MalformedHeaders::kFarFuture},
                1);
  EXPECT_EQ(header(future.handle("Up", clock_), "X-RateLimit-Reset"),
            std::to_string(unix_now() + 315'360'000));
  Portal bucket("imdb",
                {.dialect = Dialect::kTokenBucket,
                 .limit = 1,
                 .retry_after_style = RetryAfterStyle::kHttpDate,
                 .malformed_headers = MalformedHeaders::kPast},
                1);
  bucket.handle("Up", clock_);
  EXPECT_EQ(header(bucket.handle("Up", clock_), "Retry-After"), format_http_date(clock_.now() - 1h));
  Portal seconds(
      "imdb",
      {.dialect = Dialect::kTokenBucket, .limit = 1, .malformed_headers = MalformedHeaders::kFarFuture}, 1);
  seconds.handle("Up", clock_);
  EXPECT_EQ(header(seconds.handle("Up", clock_), "Retry-After"), "315360000");
}

TEST_F(PortalTest, ErrorRate_ShareOfAnswersAre5xx) {
  Portal p("imdb", {.error_rate = 0.3}, 7);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    const int status = p.handle("Up", clock_).status;
    ASSERT_TRUE(status == 200 || status == 500 || status == 503) << status;
    errors += status != 200;
  }
  // 600 expected; the bounds are more than 6 standard deviations wide.
  EXPECT_GT(errors, 480);
  EXPECT_LT(errors, 720);
  EXPECT_EQ(p.stats().errors, errors);
}

TEST_F(PortalTest, ErrorRate_SameSeed_SameSequence) {
  auto statuses = [this](std::uint64_t seed) {
    Portal p("imdb", {.error_rate = 0.5}, seed);
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(p.handle("Up", clock_).status);
    return out;
  };
  EXPECT_EQ(statuses(3), statuses(3));
  EXPECT_NE(statuses(3), statuses(4));
  const auto s = statuses(3);
  EXPECT_NE(std::find(s.begin(), s.end(), 500), s.end());
  EXPECT_NE(std::find(s.begin(), s.end(), 503), s.end());
}

TEST_F(PortalTest, ErrorRate_ThrottledRequests_Not5xx) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 1, .error_rate = 1.0}, 1);
  EXPECT_GE(p.handle("Up", clock_).status, 500);
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
}

TEST_F(PortalTest, Stats_CountsPerMovie) {
  Portal p("imdb", {}, 1);
  p.handle("Up", clock_);
  p.handle("Up", clock_);
  p.handle("Heat", clock_);
  const auto s = p.stats();
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.movies, (std::map<std::string, std::int64_t>{{"Heat", 1}, {"Up", 2}}));
}

TEST_F(PortalTest, Stats_MaxInWindow_SlidingAndHalfOpen) {
  Portal p("imdb", {.window = 1s}, 1);
  p.handle("a", clock_);  // t = 0
  clock_.advance(500ms);
  p.handle("a", clock_);  // 0.5
  clock_.advance(400ms);
  p.handle("a", clock_);  // 0.9: three within [0, 1)
  EXPECT_EQ(p.stats().max_in_window, 3);
  clock_.advance(100ms);
  p.handle("a", clock_);  // 1.0: t = 0 has left the window
  clock_.advance(400ms);
  p.handle("a", clock_);  // 1.4: 0.5, 0.9, 1.0, 1.4 are within 1 s
  EXPECT_EQ(p.stats().max_in_window, 4);
  clock_.advance(10s);
  p.handle("a", clock_);
  EXPECT_EQ(p.stats().max_in_window, 4);  // the most ever, not the current
}

TEST_F(PortalTest, Stats_FixedWindowBoundary_MaxInWindowSeesTwiceTheLimit) {
  // A client that fills the end of one window and the start of the next
  // is within a fixed-window server's limit but not within "N per any W".
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 5, .window = 1s}, 1);
  clock_.advance(900ms);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.handle("a", clock_).status, 200);
  clock_.advance(200ms);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.handle("a", clock_).status, 200);
  EXPECT_EQ(p.stats().max_in_window, 10);
}

TEST_F(PortalTest, Reset_ForgetsCountsAndLimiterState) {
  Portal p("imdb", {.dialect = Dialect::kFixedWindow, .limit = 1, .window = 1s}, 1);
  p.handle("Up", clock_);
  EXPECT_EQ(p.handle("Up", clock_).status, 429);
  p.reset();
  EXPECT_EQ(p.stats().requests, 0);
  EXPECT_EQ(p.stats().window, 1s);
  EXPECT_EQ(p.handle("Up", clock_).status, 200);
}

TEST_F(PortalTest, MalformedBody_ServedWith200) {
  Portal p("imdb", {.malformed_body = MalformedBody::kHtml}, 1);
  const auto a = p.handle("Up", clock_);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.content_type, "text/html");
  EXPECT_TRUE(a.body.starts_with("<html>"));
}

}  // namespace
}  // namespace ratchet::mock_portal
