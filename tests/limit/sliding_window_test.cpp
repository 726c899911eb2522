#include "limit/sliding_window.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "limit/sliding_log.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value());
  return r.value_or(Slot{});
}

TEST(SlidingWindow_Reserve, FirstRateCallsGoAtOnceThenTheNextWaitsAFullWindow) {
  SlidingWindowLimiter l(3, kSec);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + kSec);
}

TEST(SlidingWindow_Reserve, NoWindowOfAnyAlignmentHoldsMoreThanRate) {
  // A server counting windows aligned anywhere must never see 3 calls.
  SlidingWindowLimiter l(2, kSec);
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(l.reserve(kT0 + 900'000, kT0 + 900'000)).at_us, kT0 + 900'000);
  // +1.0s is outside [0.0, 1.0), which already holds two; every interval that
  // holds +1.0s holds at most +0.9s besides, so it fits.
  EXPECT_EQ(must(l.reserve(kT0 + 1'000'000, kT0 + 1'000'000)).at_us, kT0 + kSec);
  // Now 0.9 and 1.0 are both in [0.9, 1.9): the next waits until 1.9.
  EXPECT_EQ(must(l.reserve(kT0 + 1'000'000, kT0 + 1'000'000)).at_us, kT0 + 1'900'000);
}

TEST(SlidingWindow_Reserve, LaterRequestsGetLaterSlotsInOrder) {
  SlidingWindowLimiter l(1, kSec);
  std::int64_t prev = 0;
  for (int i = 0; i < 10; ++i) {
    auto s = must(l.reserve(kT0, kT0));
    EXPECT_EQ(s.at_us, kT0 + i * kSec);
    EXPECT_GT(s.at_us, prev);
    prev = s.at_us;
  }
}

TEST(SlidingWindow_Cancel, GivesTheSlotBackToTheNextRequest) {
  SlidingWindowLimiter l(1, kSec);
  must(l.reserve(kT0, kT0));
  auto second = must(l.reserve(kT0, kT0));
  auto third = must(l.reserve(kT0, kT0));
  ASSERT_EQ(second.at_us, kT0 + kSec);
  ASSERT_EQ(third.at_us, kT0 + 2 * kSec);
  ASSERT_TRUE(l.cancel(second));
  // The freed gap at +1s is found again.
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + kSec);
}

TEST(SlidingWindow_Start, OnTimeUseIsHonoured) {
  SlidingWindowLimiter l(1, kSec);
  must(l.reserve(kT0, kT0));
  auto s = must(l.reserve(kT0, kT0));
  auto r = l.start(s, s.at_us);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, UseResult::kStarted);
}

TEST(SlidingWindow_Start, LateUseIsHonouredWhenNothingWasGrantedAfterIt) {
  SlidingWindowLimiter l(1, kSec);
  auto s = must(l.reserve(kT0, kT0));
  auto r = l.start(s, kT0 + 300'000);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, UseResult::kStarted);
  EXPECT_EQ(s.at_us, kT0 + 300'000);
  // The late start is what counts: the next slot is a window after it.
  EXPECT_EQ(must(l.reserve(kT0 + 300'000, kT0)).at_us, kT0 + 1'300'000);
}

TEST(SlidingWindow_Start, LateUseTakesTheRoomLeftAndTheNextWaitsInItsPlace) {
  SlidingWindowLimiter l(1, kSec);
  auto a = must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));  // at +1s
  auto c = must(l.reserve(kT0, kT0));  // at +2s
  auto r = l.start(a, kT0 + 500'000);  // nothing started yet: a still fits
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, UseResult::kStarted);
  // b would make two starts in [0.5, 1.5): it waits for a to leave the
  // window, without going behind c.
  EXPECT_EQ(*l.ready_at(b, b.at_us), kT0 + 1'500'000);
  EXPECT_EQ(*l.start(b, b.at_us), UseResult::kMoved);
  EXPECT_EQ(*l.start(b, kT0 + 1'500'000), UseResult::kStarted);
  EXPECT_EQ(*l.ready_at(c, c.at_us), kT0 + 2'500'000);
}

TEST(SlidingWindow_Start, BeforeItsTimeIsRefused) {
  SlidingWindowLimiter l(1, kSec);
  must(l.reserve(kT0, kT0));
  auto s = must(l.reserve(kT0, kT0));
  auto r = l.start(s, kT0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
}

TEST(SlidingWindow_Reserve, StaleClockReadingNeverGetsATimeBeforeTheHighWaterMark) {
  SlidingWindowLimiter l(1, kSec);
  must(l.reserve(kT0 + 5 * kSec, kT0 + 5 * kSec));
  // A thread that read the clock earlier gets no time before the latest now seen.
  EXPECT_GE(must(l.reserve(kT0, kT0)).at_us, kT0 + 5 * kSec);
}

// A thread reads the clock, then waits for the lock while another, with a
// reading 10 ms later, reserves. Its start is checked at its own reading:
// it goes, rather than being told to wait 10 ms for the other's.
TEST(SlidingWindow_Start, ReadingAFewMillisecondsOlderThanAnothersStartsAtItsOwn) {
  SlidingWindowLimiter l(100, kSec);
  auto a = must(l.reserve(kT0, kT0));
  must(l.reserve(kT0 + 20'000, kT0 + 20'000));
  auto r = l.start(a, kT0 + 10'000);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, UseResult::kStarted);
  EXPECT_EQ(a.at_us, kT0 + 10'000);
}

// The window stays exact at such a reading: E started late, at +30 ms; a
// reading of +1010 ms, 70 ms older than the latest seen, finds E still in
// its window and waits until E leaves it (+1030 ms), neither starting at
// +1010 ms (two calls 980 ms apart) nor waiting for the latest reading.
TEST(SlidingWindow_Start, ReadingOlderThanAnothersStillSeesTheStartsOfItsWindow) {
  SlidingWindowLimiter l(1, kSec);
  auto e = must(l.reserve(kT0, kT0));
  auto x = must(l.reserve(kT0, kT0));
  EXPECT_EQ(x.at_us, kT0 + kSec);
  ASSERT_EQ(*l.start(e, kT0 + 30'000), UseResult::kStarted);
  must(l.reserve(kT0 + 1'080'000, kT0 + 1'080'000));
  auto r = l.start(x, kT0 + 1'010'000);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, UseResult::kMoved);
  EXPECT_EQ(x.at_us, kT0 + 1'030'000);
}

TEST(SlidingLog_Earliest, FindsAGapBetweenReservations) {
  // Entries at 0 and 3s with a 1/s limit: 1s is free.
  std::vector<std::int64_t> log = {0, 3 * kSec};
  EXPECT_EQ(sliding_earliest(log, 1, kSec, 0), kSec);
  EXPECT_TRUE(sliding_fits(log, 1, kSec, 2 * kSec));
  EXPECT_FALSE(sliding_fits(log, 1, kSec, 2'500'000));
}

TEST(SlidingWindow_Describe, NamesRateWindowAndAlgorithm) {
  EXPECT_EQ(SlidingWindowLimiter(10, kSec).describe(), "10/1s sliding window");
}

}  // namespace
}  // namespace ratchet::limit
