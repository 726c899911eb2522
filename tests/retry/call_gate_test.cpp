#include "retry/call_gate.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;
using Gate = CallGate;

config::RetrySpec no_jitter(int attempts = 3) {
  config::RetrySpec s;
  s.attempts = attempts;
  s.backoff.initial = 1s;
  s.backoff.max = 10s;
  s.backoff.jitter = config::Jitter::kNone;
  return s;
}

CallGateParts parts_with(std::int64_t rate, Duration per) {
  CallGateParts p;
  p.retry = no_jitter();
  p.limiters.push_back(std::make_shared<limit::SlidingWindowLimiter>(rate, limit::to_micros(per)));
  p.pacer = std::make_shared<limit::AdaptivePacer>();
  return p;
}

Gate::Go go_or_fail(Gate::Admission a) {
  if (auto* w = std::get_if<Gate::Wait>(&a))
    ADD_FAILURE() << "waited, reason " << static_cast<int>(w->reason);
  if (auto* f = std::get_if<Gate::Fail>(&a)) ADD_FAILURE() << f->error.to_string();
  return std::move(std::get<Gate::Go>(a));
}

TEST(CallGate_Admit, NoLimitsGoesAtOnceAndSuccessIsDone) {
  FakeClock clock;
  Gate gate(CallGateParts{});
  CallState step(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  auto v = gate.record(step, std::move(go.ticket), Outcome::ok(), {}, clock.now());
  EXPECT_TRUE(std::holds_alternative<Gate::Done>(v));
}

TEST(CallGate_Admit, RateLimitedStepWaitsForItsHeldSlotThenGoes) {
  FakeClock clock;
  Gate gate(parts_with(1, 1s));
  CallState first(clock.now()), second(clock.now());
  go_or_fail(gate.admit(first, clock.now()));
  auto a = gate.admit(second, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(a));
  EXPECT_EQ(std::get<Gate::Wait>(a).until, clock.now() + 1s);
  EXPECT_EQ(std::get<Gate::Wait>(a).reason, Gate::WaitReason::kRateLimit);
  EXPECT_TRUE(second.holds_slot());
  // A third step queues behind the second's held slot.
  CallState third(clock.now());
  auto b = gate.admit(third, clock.now());
  EXPECT_EQ(std::get<Gate::Wait>(b).until, clock.now() + 2s);
  clock.advance(1s);
  go_or_fail(gate.admit(second, clock.now()));
  EXPECT_EQ(second.retry_state().throttled_wait, 1s);
}

TEST(CallGate_Admit, EachRetryAttemptTakesANewSlot) {
  FakeClock clock;
  auto parts = parts_with(1, 10s);
  parts.retry.backoff.initial = 1s;
  Gate gate(parts);
  CallState step(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  auto v = gate.record(step, std::move(go.ticket), Outcome::http(503), {}, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::RetryAt>(v));
  EXPECT_EQ(std::get<Gate::RetryAt>(v).at, clock.now() + 1s);
  EXPECT_FALSE(std::get<Gate::RetryAt>(v).throttled);
  auto early = gate.admit(step, clock.now());
  EXPECT_EQ(std::get<Gate::Wait>(early).reason, Gate::WaitReason::kBackoff);
  clock.advance(1s);
  // The backoff is over but the 1-per-10s limit holds the retry until +10s.
  auto a = gate.admit(step, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(a));
  EXPECT_EQ(std::get<Gate::Wait>(a).until, clock.now() + 9s);
}

TEST(CallGate_Admit, OpenBreakerParksBeforeTakingALimiterSlot) {
  FakeClock clock;
  auto parts = parts_with(1, 1s);
  config::BreakerSpec b;
  b.consecutive_failures = 1;
  b.open_for = 20s;
  parts.breaker = std::make_shared<CircuitBreaker>(b);
  parts.retry.attempts = 5;
  Gate gate(parts);
  CallState step(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  gate.record(step, std::move(go.ticket), Outcome::connect("refused"), {}, clock.now());
  clock.advance(5s);
  auto a = gate.admit(step, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(a));
  EXPECT_EQ(std::get<Gate::Wait>(a).reason, Gate::WaitReason::kCircuitOpen);
  EXPECT_EQ(std::get<Gate::Wait>(a).until, clock.now() + 15s);
  EXPECT_FALSE(step.holds_slot());
}

TEST(CallGate_Admit, ConcurrencyCapParksUntilAPermitIsReleased) {
  FakeClock clock;
  CallGateParts parts;
  parts.concurrency = limit::ConcurrencyLimiter::make(1);
  bool woken = false;
  parts.concurrency->on_release([&] { woken = true; });
  Gate gate(parts);
  CallState a(clock.now()), b(clock.now());
  auto go = go_or_fail(gate.admit(a, clock.now()));
  auto wait = gate.admit(b, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(wait));
  EXPECT_EQ(std::get<Gate::Wait>(wait).reason, Gate::WaitReason::kConcurrency);
  EXPECT_FALSE(std::get<Gate::Wait>(wait).until);
  gate.record(a, std::move(go.ticket), Outcome::ok(), {}, clock.now());
  EXPECT_TRUE(woken);
  go_or_fail(gate.admit(b, clock.now()));
}

TEST(CallGate_Record, ThrottledReplyIsNotAFailureAndSlowsTheWholePlugin) {
  FakeClock clock;
  auto parts = parts_with(100, 1s);
  parts.retry.attempts = 1;  // a failure would be final; throttling is not one
  Gate gate(parts);
  CallState step(clock.now()), other(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  std::vector<limit::HttpHeader> headers = {{"Retry-After", "5"}};
  auto v = gate.record(step, std::move(go.ticket), Outcome::http(429), headers, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::RetryAt>(v));
  EXPECT_TRUE(std::get<Gate::RetryAt>(v).throttled);
  EXPECT_EQ(std::get<Gate::RetryAt>(v).at, clock.now() + 5s);
  // Another step of the same plugin also waits for the server's pause.
  auto a = gate.admit(other, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(a));
  EXPECT_EQ(std::get<Gate::Wait>(a).until, clock.now() + 5s);
  clock.advance(5s);
  go_or_fail(gate.admit(other, clock.now()));  // its slot, held in order
  // The 429 also halved the learned pace: the retry comes one interval later.
  auto retry = gate.admit(step, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(retry));
  EXPECT_GT(*std::get<Gate::Wait>(retry).until, clock.now());
}

TEST(CallGate_Record, ARequestTheLimitsHeldBackNeitherPausesNorSlowsThePlugin) {
  FakeClock clock;
  auto parts = parts_with(100, 1s);
  Gate gate(parts);
  CallState step(clock.now()), other(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  // The request did not leave (no room when it was to be sent): the plugin
  // reports throttling with the engine's retry-after; the server saw nothing.
  Outcome held = Outcome::throttled(2s, "refused by the engine");
  held.held_back = true;
  auto v = gate.record(step, std::move(go.ticket), held, {}, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::RetryAt>(v));
  EXPECT_TRUE(std::get<Gate::RetryAt>(v).throttled);
  EXPECT_EQ(std::get<Gate::RetryAt>(v).at, clock.now() + 2s);
  // The step waits for its room; the rest of the plugin goes on at once.
  EXPECT_EQ(parts.pacer->resume_at(), TimePoint{});
  EXPECT_EQ(parts.pacer->interval(), Duration::zero());
  go_or_fail(gate.admit(other, clock.now()));
}

TEST(CallGate_Admit, AStepBackBeforeItsSlotTradesItForASoonerOneWhenThePaceSpedUp) {
  FakeClock clock;
  CallGateParts parts;
  parts.retry = no_jitter();
  parts.max_wait = std::chrono::hours(1);
  limit::PacerOptions exact;
  exact.margin = 1.0;
  parts.pacer = std::make_shared<limit::AdaptivePacer>(exact);
  auto pacer = parts.pacer;
  Gate gate(std::move(parts));
  limit::PaceHint learned;
  learned.interval = 1s;
  pacer->observe(learned, clock.now());
  limit::PaceHint refused;
  refused.throttled = true;
  pacer->observe(refused, clock.now());  // 2 s apart now, speeding back up
  EXPECT_TRUE(pacer->recovering());
  std::vector<std::unique_ptr<CallState>> queue;
  Gate::Wait last{};
  for (int i = 0; i < 5; ++i) {
    queue.push_back(std::make_unique<CallState>(clock.now()));
    auto a = gate.admit(*queue.back(), clock.now());
    ASSERT_TRUE(std::holds_alternative<Gate::Wait>(a));
    last = std::get<Gate::Wait>(a);
  }
  ASSERT_TRUE(last.until);
  queue.erase(queue.begin(), queue.begin() + 2);                                // two holders give up
  for (int i = 0; i < 10; ++i) pacer->observe(limit::PaceHint{}, clock.now());  // speeding up
  // The last holder comes back early (another step of its job woke it): three
  // queue now, at the faster pace, so it takes a sooner slot.
  auto again = gate.admit(*queue.back(), clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Wait>(again));
  EXPECT_LT(*std::get<Gate::Wait>(again).until, *last.until - 2s);
}

TEST(CallGate_Admit, SlotWaitsPastMaxWaitFailTheStepAsThrottled) {
  FakeClock clock;
  auto parts = parts_with(1, 1h);
  parts.max_wait = 10min;
  Gate gate(parts);
  CallState first(clock.now()), second(clock.now());
  go_or_fail(gate.admit(first, clock.now()));
  auto a = gate.admit(second, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Fail>(a));
  EXPECT_EQ(std::get<Gate::Fail>(a).error.code(), ErrorCode::kThrottled);
  EXPECT_FALSE(second.holds_slot());  // the slot went back
  CallState third(clock.now());
  auto b = gate.admit(third, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Fail>(b));
}

TEST(CallGate_Admit, DeadlinePassedFailsAsTimeout) {
  FakeClock clock;
  CallGateParts parts;
  parts.retry = no_jitter(10);
  parts.retry.deadline = 3s;
  Gate gate(parts);
  CallState step(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  gate.record(step, std::move(go.ticket), Outcome::timeout("slow"), {}, clock.now());
  clock.advance(4s);
  auto a = gate.admit(step, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Fail>(a));
  EXPECT_EQ(std::get<Gate::Fail>(a).error.code(), ErrorCode::kTimeout);
}

TEST(CallGate_Admit, AttemptTimeoutIsTheTightestOfPerTryRequestAndDeadline) {
  FakeClock clock;
  CallGateParts parts;
  parts.request_timeout = 30s;
  parts.retry.per_try_timeout = 5s;
  parts.retry.deadline = 4s;
  Gate gate(parts);
  CallState step(clock.now());
  EXPECT_EQ(go_or_fail(gate.admit(step, clock.now())).timeout, 4s);
}

TEST(CallGate_Ticket, DroppedTicketReleasesItsPermit) {
  FakeClock clock;
  CallGateParts parts;
  parts.concurrency = limit::ConcurrencyLimiter::make(1);
  Gate gate(parts);
  CallState a(clock.now()), b(clock.now());
  { auto go = go_or_fail(gate.admit(a, clock.now())); }
  go_or_fail(gate.admit(b, clock.now()));
}

TEST(CallGate_StepCall, DestroyedStepGivesItsHeldSlotBack) {
  FakeClock clock;
  Gate gate(parts_with(1, 1s));
  CallState first(clock.now());
  go_or_fail(gate.admit(first, clock.now()));
  {
    CallState gone(clock.now());
    ASSERT_TRUE(std::holds_alternative<Gate::Wait>(gate.admit(gone, clock.now())));
  }
  CallState next(clock.now());
  EXPECT_EQ(std::get<Gate::Wait>(gate.admit(next, clock.now())).until, clock.now() + 1s);
}

TEST(CallGate_Record, ClampedHeaderIsReportedForLogging) {
  FakeClock clock;
  auto parts = parts_with(100, 1s);
  parts.headers.max_wait = 1min;
  Gate gate(parts);
  CallState step(clock.now());
  auto go = go_or_fail(gate.admit(step, clock.now()));
  std::vector<limit::HttpHeader> headers = {{"X-RateLimit-Remaining", "0"},
                                            {"X-RateLimit-Reset", "4102444800"}};
  limit::PaceHint hint;
  auto v = gate.record(step, std::move(go.ticket), Outcome::http(429), headers, clock.now(), &hint);
  EXPECT_TRUE(hint.clamped);
  EXPECT_EQ(std::get<Gate::RetryAt>(v).at, clock.now() + 1min);
}

// A header's wait is capped at the plugin's max_wait (docs/semantics.md
// rule 9), not at a fixed hour: a server with a day's quota that answered
// Retry-After: 7200 was called again an hour early, and refused hourly.
TEST(MakeCallGate, AHeadersWaitIsCappedAtThePluginsMaxWaitNotAnHour) {
  FakeClock clock;
  config::CallPolicy policy;
  policy.max_wait = std::chrono::hours(48);
  auto gate = make_call_gate(policy, "portal/op");
  ASSERT_TRUE(gate) << gate.error().to_string();
  CallState step(clock.now());
  auto go = go_or_fail((*gate)->admit(step, clock.now()));
  const std::vector<limit::HttpHeader> headers = {{"Retry-After", "7200"}};
  limit::PaceHint hint;
  auto v = (*gate)->record(step, std::move(go.ticket), Outcome::http(429), headers, clock.now(), &hint);
  EXPECT_FALSE(hint.clamped);
  EXPECT_EQ(std::get<Gate::RetryAt>(v).at, clock.now() + 2h);
}

TEST(MakeCallGate, BuildsFromACallPolicy) {
  FakeClock clock;
  config::CallPolicy policy;
  config::LimitSpec l;
  l.rate = 2;
  l.per = 1s;
  policy.limits.push_back(l);
  policy.concurrency = 4;
  auto gate = make_call_gate(policy, "imdb/get_rating");
  ASSERT_TRUE(gate) << gate.error().to_string();
  CallState a(clock.now()), b(clock.now()), c(clock.now());
  go_or_fail((*gate)->admit(a, clock.now()));
  go_or_fail((*gate)->admit(b, clock.now()));
  EXPECT_TRUE(std::holds_alternative<Gate::Wait>((*gate)->admit(c, clock.now())));
  EXPECT_EQ(declared_pace(policy.limits), 500ms);
}

}  // namespace
}  // namespace ratchet::retry
