#include "retry/circuit_breaker.hpp"

#include <gtest/gtest.h>

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;

config::BreakerSpec spec() {
  config::BreakerSpec s;
  s.consecutive_failures = 3;
  s.open_for = 30s;
  s.half_open_probes = 2;
  return s;
}

void fail_n(CircuitBreaker& b, int n, TimePoint now) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(b.admit(now).allowed);
    b.record(true, false, now);
  }
}

TEST(CircuitBreaker_Closed, OpensAfterConsecutiveFailures) {
  FakeClock clock;
  CircuitBreaker b(spec());
  fail_n(b, 2, clock.now());
  EXPECT_EQ(b.state(clock.now()), BreakerState::kClosed);
  fail_n(b, 1, clock.now());
  EXPECT_EQ(b.state(clock.now()), BreakerState::kOpen);
}

TEST(CircuitBreaker_Closed, ASuccessResetsTheRun) {
  FakeClock clock;
  CircuitBreaker b(spec());
  fail_n(b, 2, clock.now());
  b.record(false, false, clock.now());
  fail_n(b, 2, clock.now());
  EXPECT_EQ(b.state(clock.now()), BreakerState::kClosed);
}

TEST(CircuitBreaker_Open, FailsFastAndSaysWhenItHalfOpens) {
  FakeClock clock;
  CircuitBreaker b(spec());
  fail_n(b, 3, clock.now());
  auto a = b.admit(clock.now() + 10s);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_at, clock.now() + 30s);
}

TEST(CircuitBreaker_HalfOpen, ProbesThenClosesAfterEnoughSuccesses) {
  FakeClock clock;
  CircuitBreaker b(spec());
  fail_n(b, 3, clock.now());
  clock.advance(30s);
  auto p1 = b.admit(clock.now());
  auto p2 = b.admit(clock.now());
  ASSERT_TRUE(p1.allowed && p1.probe);
  ASSERT_TRUE(p2.allowed && p2.probe);
  EXPECT_FALSE(b.admit(clock.now()).allowed);  // only two probes at a time
  b.record(false, true, clock.now());
  EXPECT_EQ(b.state(clock.now()), BreakerState::kHalfOpen);
  b.record(false, true, clock.now());
  EXPECT_EQ(b.state(clock.now()), BreakerState::kClosed);
  EXPECT_TRUE(b.admit(clock.now()).allowed);
}

TEST(CircuitBreaker_HalfOpen, AFailedProbeOpensAgain) {
  FakeClock clock;
  CircuitBreaker b(spec());
  fail_n(b, 3, clock.now());
  clock.advance(30s);
  ASSERT_TRUE(b.admit(clock.now()).probe);
  b.record(true, true, clock.now());
  auto a = b.admit(clock.now());
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_at, clock.now() + 30s);
}

TEST(CircuitBreaker_HalfOpen, AReleasedProbeFreesItsPlace) {
  FakeClock clock;
  auto s = spec();
  s.half_open_probes = 1;
  CircuitBreaker b(s);
  fail_n(b, 3, clock.now());
  clock.advance(30s);
  ASSERT_TRUE(b.admit(clock.now()).probe);
  EXPECT_FALSE(b.admit(clock.now()).allowed);
  b.release_probe();
  EXPECT_TRUE(b.admit(clock.now()).allowed);
}

TEST(CircuitBreaker_Ratio, OpensWhenTheFailureRatioOverTheWindowIsReached) {
  FakeClock clock;
  auto s = spec();
  s.consecutive_failures = 100;
  s.failure_ratio = 0.5;
  s.min_calls = 10;
  s.window = 60s;
  CircuitBreaker b(s);
  for (int i = 0; i < 8; ++i) b.record(i % 2 == 0, false, clock.now());  // 4 of 8 failed
  EXPECT_EQ(b.state(clock.now()), BreakerState::kClosed);                // below min_calls
  b.record(false, false, clock.now());
  b.record(true, false, clock.now());  // 5 of 10
  EXPECT_EQ(b.state(clock.now()), BreakerState::kOpen);
}

TEST(CircuitBreaker_Ratio, OldCallsLeaveTheWindow) {
  FakeClock clock;
  auto s = spec();
  s.consecutive_failures = 100;
  s.failure_ratio = 0.5;
  s.min_calls = 4;
  s.window = 10s;
  CircuitBreaker b(s);
  b.record(true, false, clock.now());
  b.record(true, false, clock.now());
  clock.advance(11s);
  for (int i = 0; i < 3; ++i) b.record(false, false, clock.now());
  b.record(true, false, clock.now());  // 1 of 4 in the window
  EXPECT_EQ(b.state(clock.now()), BreakerState::kClosed);
}

TEST(CircuitBreaker_Disabled, AlwaysAdmits) {
  FakeClock clock;
  auto s = spec();
  s.enabled = false;
  CircuitBreaker b(s);
  for (int i = 0; i < 10; ++i) b.record(true, false, clock.now());
  EXPECT_TRUE(b.admit(clock.now()).allowed);
}

}  // namespace
}  // namespace ratchet::retry
