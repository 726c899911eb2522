#include "limit/adaptive_pacer.hpp"

#include <gtest/gtest.h>

#include "limit/micros.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;

std::int64_t next_slot(AdaptivePacer& p, TimePoint now) {
  auto s = p.reserve(to_micros(now), to_micros(now));
  EXPECT_TRUE(s);
  auto used = p.start(*s, std::max(s->at_us, to_micros(now)));
  EXPECT_TRUE(used && *used == UseResult::kStarted);
  return s->at_us;
}

PaceHint bare_429() {
  PaceHint h;
  h.throttled = true;
  h.source = HintSource::kBareThrottle;
  return h;
}

TEST(AdaptivePacer_Observe, RetryAfterHoldsEveryStartUntilResume) {
  FakeClock clock;
  AdaptivePacer p;
  PaceHint h;
  h.resume_at = clock.now() + 30s;
  p.observe(h, clock.now());
  EXPECT_EQ(next_slot(p, clock.now()), to_micros(clock.now() + 30s));
}

TEST(AdaptivePacer_Observe, LearnedIntervalSpacesStarts) {
  FakeClock clock;
  AdaptivePacer p;
  PaceHint h;
  h.interval = 250ms;
  p.observe(h, clock.now());
  const auto a = next_slot(p, clock.now());
  const auto b = next_slot(p, clock.now());
  EXPECT_EQ(b - a, 250'000);
}

TEST(AdaptivePacer_Observe, LearnedPaceNeverGoesFasterThanTheDeclaredOne) {
  FakeClock clock;
  PacerOptions o;
  o.floor = 100ms;  // 10/s declared
  AdaptivePacer p(o);
  PaceHint h;
  h.interval = 1ms;  // the server would allow 1000/s
  p.observe(h, clock.now());
  EXPECT_EQ(p.interval(), 100ms);
}

TEST(AdaptivePacer_Observe, Bare429HalvesTheObservedRateThenRecoversAdditively) {
  FakeClock clock;
  AdaptivePacer p;
  for (int i = 0; i < 10; ++i) {  // calls every 100 ms, unpaced
    next_slot(p, clock.now());
    clock.advance(100ms);
  }
  p.observe(bare_429(), clock.now());
  EXPECT_EQ(p.interval(), 200ms);  // half the rate
  EXPECT_GE(p.resume_at(), clock.now() + 200ms);
  Duration before = p.interval();
  for (int i = 0; i < 10; ++i) p.observe(PaceHint{}, clock.now());
  EXPECT_LT(p.interval(), before);  // speeding back up
  for (int i = 0; i < 1000; ++i) p.observe(PaceHint{}, clock.now());
  EXPECT_LT(p.interval(), 10ms);  // recovered well past the rate before the 429
}

TEST(AdaptivePacer_Observe, A429WithOnlyRetryAfterAlsoSlowsThePace) {
  FakeClock clock;
  AdaptivePacer p;
  for (int i = 0; i < 10; ++i) {
    next_slot(p, clock.now());
    clock.advance(50ms);
  }
  PaceHint h;
  h.throttled = true;
  h.resume_at = clock.now() + 2s;
  h.source = HintSource::kRetryAfter;
  p.observe(h, clock.now());
  EXPECT_EQ(p.resume_at(), clock.now() + 2s);
  EXPECT_EQ(p.interval(), 100ms);
  clock.advance(2s);
  const auto a = next_slot(p, clock.now());
  EXPECT_EQ(next_slot(p, clock.now()) - a, 100'000);
}

TEST(AdaptivePacer_Observe, RecoveryStopsAtTheLearnedPace) {
  FakeClock clock;
  AdaptivePacer p;
  PaceHint learned;
  learned.interval = 100ms;
  p.observe(learned, clock.now());
  p.observe(bare_429(), clock.now());
  EXPECT_EQ(p.interval(), 200ms);
  for (int i = 0; i < 1000; ++i) p.observe(PaceHint{}, clock.now());
  EXPECT_EQ(p.interval(), 100ms);
}

TEST(AdaptivePacer_Observe, RepliesFromCallsInFlightAtTheDecreaseDoNotDecreaseAgain) {
  FakeClock clock;
  AdaptivePacer p;
  PaceHint learned;
  learned.interval = 100ms;
  p.observe(learned, clock.now());
  const TimePoint started = clock.now();
  clock.advance(50ms);
  p.observe(bare_429(), clock.now(), started);
  p.observe(bare_429(), clock.now(), started);
  p.observe(bare_429(), clock.now(), started);
  EXPECT_EQ(p.interval(), 200ms);
  clock.advance(1s);
  p.observe(bare_429(), clock.now(), clock.now() - 10ms);  // a call started after the decrease
  EXPECT_EQ(p.interval(), 400ms);
}

TEST(AdaptivePacer_Start, ASlotGrantedBeforeAPauseIsMovedPastIt) {
  FakeClock clock;
  AdaptivePacer p;
  auto s = p.reserve(to_micros(clock.now()), to_micros(clock.now()));
  ASSERT_TRUE(s);
  PaceHint h;
  h.resume_at = clock.now() + 5s;
  p.observe(h, clock.now());
  auto used = p.start(*s, to_micros(clock.now()));
  ASSERT_TRUE(used);
  EXPECT_EQ(*used, UseResult::kMoved);
  EXPECT_EQ(s->at_us, to_micros(clock.now() + 5s));
}

}  // namespace
}  // namespace ratchet::limit
