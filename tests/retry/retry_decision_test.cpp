#include "retry/retry_decision.hpp"

#include <gtest/gtest.h>

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;

config::RetrySpec spec(int attempts = 3) {
  config::RetrySpec s;
  s.attempts = attempts;
  s.backoff.kind = config::Backoff::kExponential;
  s.backoff.initial = 1s;
  s.backoff.max = 10s;
  s.backoff.jitter = config::Jitter::kNone;
  return s;
}

struct Fixture : ::testing::Test {
  FakeClock clock;
  RetryState state;
  Fixture() { state.began = clock.now(); }
  RetryVerdict decide(const config::RetrySpec& s, const Outcome& o,
                      std::optional<TimePoint> resume = std::nullopt, Duration max_wait = 1h) {
    return decide_retry(s, max_wait, state, o, resume, clock.now(), 0.5);
  }
};

using RetryDecision = Fixture;

TEST_F(RetryDecision, SuccessIsDone) {
  EXPECT_EQ(decide(spec(), Outcome::ok()).kind, RetryVerdict::Kind::kDone);
}

TEST_F(RetryDecision, ServerErrorsRetryWithBackoffUntilAttemptsRunOut) {
  auto s = spec(3);
  auto v1 = decide(s, Outcome::http(503));
  ASSERT_EQ(v1.kind, RetryVerdict::Kind::kRetry);
  EXPECT_EQ(v1.at, clock.now() + 1s);
  EXPECT_FALSE(v1.throttled);
  auto v2 = decide(s, Outcome::http(500));
  EXPECT_EQ(v2.at, clock.now() + 2s);
  auto v3 = decide(s, Outcome::http(502));
  ASSERT_EQ(v3.kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(v3.error->code(), ErrorCode::kPlugin);
  // Told apart from the job's attempts, which the step shows beside it.
  EXPECT_NE(
      v3.error->message().find("gave up after 3 failed calls in this attempt of the job; retry.attempts = 3"),
      std::string::npos)
      << v3.error->message();
}

TEST_F(RetryDecision, ClassifiesEachConditionAgainstOn) {
  auto s = spec(5);
  s.on = {config::RetryOn::kTimeout};
  EXPECT_EQ(decide(s, Outcome::timeout("read")).kind, RetryVerdict::Kind::kRetry);
  EXPECT_EQ(decide(s, Outcome::connect("refused")).kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(decide(s, Outcome::http(500)).kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(decide(s, Outcome::retryable("busy")).kind, RetryVerdict::Kind::kFail);
  auto t = decide(s, Outcome::throttled());
  ASSERT_EQ(t.kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(t.error->code(), ErrorCode::kThrottled);
}

TEST_F(RetryDecision, FatalAndUnlistedClientErrorsAreNotRetried) {
  auto s = spec(5);
  EXPECT_EQ(decide(s, Outcome::fatal("bad key")).kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(decide(s, Outcome::http(404)).kind, RetryVerdict::Kind::kFail);
}

TEST_F(RetryDecision, ListedStatusCodesAreRetried) {
  auto s = spec(5);
  s.statuses = {409};
  EXPECT_EQ(decide(s, Outcome::http(409)).kind, RetryVerdict::Kind::kRetry);
}

TEST_F(RetryDecision, ThrottlingDoesNotUseUpAttempts) {
  auto s = spec(2);
  for (int i = 0; i < 10; ++i) {
    auto v = decide(s, Outcome::throttled(), clock.now() + 1s);
    ASSERT_EQ(v.kind, RetryVerdict::Kind::kRetry) << i;
    EXPECT_TRUE(v.throttled);
  }
  EXPECT_EQ(state.failures, 0);
  EXPECT_EQ(state.throttled, 10);
  EXPECT_EQ(decide(s, Outcome::http(500)).kind, RetryVerdict::Kind::kRetry);  // attempts still there
}

TEST_F(RetryDecision, ThrottledWaitsAreBoundedByMaxWait) {
  auto s = spec(2);
  auto v = decide(s, Outcome::throttled(), clock.now() + 40s, 60s);
  ASSERT_EQ(v.kind, RetryVerdict::Kind::kRetry);
  auto w = decide(s, Outcome::throttled(), clock.now() + 40s, 60s);
  ASSERT_EQ(w.kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(w.error->code(), ErrorCode::kThrottled);
  EXPECT_NE(w.error->message().find("max_wait"), std::string::npos);
}

TEST_F(RetryDecision, ServerRetryAfterWinsWhenLongerWithinMax) {
  auto s = spec(5);
  auto v = decide(s, Outcome::http(503), clock.now() + 7s);
  EXPECT_EQ(v.at, clock.now() + 7s);
  auto capped = decide(s, Outcome::http(503), clock.now() + 1h);
  EXPECT_EQ(capped.at, clock.now() + 10s);  // backoff.max
  auto shorter = decide(s, Outcome::http(503), clock.now() + 1ms);
  EXPECT_EQ(shorter.at, clock.now() + 4s);  // the computed backoff is longer
}

TEST_F(RetryDecision, PluginRetryAfterCountsLikeTheServers) {
  auto s = spec(5);
  auto v = decide(s, Outcome::throttled(9s));
  EXPECT_EQ(v.at, clock.now() + 9s);
}

TEST_F(RetryDecision, RetryPastTheDeadlineFailsAsTimeout) {
  auto s = spec(10);
  s.deadline = 5s;
  clock.advance(4s);
  auto v = decide(s, Outcome::http(500), clock.now() + 3s);
  ASSERT_EQ(v.kind, RetryVerdict::Kind::kFail);
  EXPECT_EQ(v.error->code(), ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ratchet::retry
