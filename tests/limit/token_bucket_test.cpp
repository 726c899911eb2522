#include "limit/token_bucket.hpp"

#include "limit/gcra_math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value());
  return r.value_or(Slot{});
}

TEST(Gcra_Make, RatesAndBurstsNearTheirMaximumDoNotOverflow) {
  // rate = INT64_MAX: an interval of 1 us, not a wrapped sum.
  const Gcra fast = Gcra::make(std::numeric_limits<std::int64_t>::max(), 1'000'000, 1);
  EXPECT_EQ(fast.interval_us, 1);
  EXPECT_EQ(fast.tolerance_us, 0);
  // burst = INT64_MAX: the tolerance saturates (a bucket that never runs dry in a century).
  const Gcra wide = Gcra::make(10, 1'000'000, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(wide.interval_us, 100'000);
  EXPECT_EQ(wide.tolerance_us, Gcra::kMaxTolerance);
  std::int64_t tat = Gcra::kIdle;
  const std::int64_t t = 1'700'000'000'000'000;
  EXPECT_EQ(wide.grant(tat, t).at_us, t);
  EXPECT_EQ(tat, t + 100'000);
  // The longest per with the largest rate and burst the config allows.
  const Gcra slow = Gcra::make(1'000'000'000, 365LL * 86'400'000'000, 1'000'000'000);
  EXPECT_EQ(slow.interval_us, 31'536);
  EXPECT_EQ(slow.tolerance_us, 999'999'999LL * 31'536);
}

TEST(TokenBucket_Reserve, IdleBucketAllowsTheDeclaredBurstAtOnce) {
  TokenBucketLimiter l(10, kSec, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
  // Then one token per 100ms.
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + 100'000);
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + 200'000);
}

TEST(TokenBucket_Reserve, BurstOfOneIsStrictSpacing) {
  TokenBucketLimiter l(4, kSec, 1);
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + 250'000);
}

TEST(TokenBucket_Reserve, RefillsWithTimeUpToTheBurst) {
  TokenBucketLimiter l(10, kSec, 3);
  for (int i = 0; i < 3; ++i) must(l.reserve(kT0, kT0));
  // After 10 s idle the bucket holds 3 again, not 100.
  const std::int64_t later = kT0 + 10 * kSec;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(must(l.reserve(later, later)).at_us, later);
  EXPECT_EQ(must(l.reserve(later, later)).at_us, later + 100'000);
}

TEST(TokenBucket_Reserve, IntervalRoundsUpSoRoundingNeverSpeedsUp) {
  TokenBucketLimiter l(3, kSec, 1);  // 333333.3 us
  must(l.reserve(kT0, kT0));
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, kT0 + 333'334);
}

TEST(TokenBucket_Cancel, TheLatestSlotComesBackExactly) {
  TokenBucketLimiter l(1, kSec, 1);
  must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));
  ASSERT_TRUE(l.cancel(b));
  EXPECT_EQ(must(l.reserve(kT0, kT0)).at_us, b.at_us);
}

TEST(TokenBucket_Cancel, AnEarlierSlotIsLostRatherThanOverbooked) {
  TokenBucketLimiter l(1, kSec, 1);
  must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));
  auto c = must(l.reserve(kT0, kT0));
  ASSERT_TRUE(l.cancel(b));
  EXPECT_GT(must(l.reserve(kT0, kT0)).at_us, c.at_us);
}

TEST(TokenBucket_Start, LateTailUseStartsAndRechargesFromTheActualStart) {
  TokenBucketLimiter l(1, kSec, 1);
  auto a = must(l.reserve(kT0, kT0));
  ASSERT_EQ(*l.start(a, kT0 + 400'000), UseResult::kStarted);
  EXPECT_EQ(must(l.reserve(kT0 + 400'000, kT0)).at_us, kT0 + 1'400'000);
}

TEST(TokenBucket_Start, LateUseTakesTheRoomItsSlotLeftAndKeepsItsPlace) {
  TokenBucketLimiter l(1, kSec, 1);
  auto a = must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));  // at +1s
  // Nothing started in a's second: a late a still fits, instead of going
  // behind every slot granted since.
  ASSERT_EQ(*l.start(a, kT0 + 400'000), UseResult::kStarted);
  EXPECT_EQ(a.at_us, kT0 + 400'000);
  // b, on time, now waits the 0.4s a's late start costs, in its place.
  EXPECT_EQ(*l.ready_at(b, b.at_us), kT0 + 1'400'000);
  ASSERT_EQ(*l.start(b, b.at_us), UseResult::kMoved);
  EXPECT_EQ(b.at_us, kT0 + 1'400'000);
  EXPECT_EQ(*l.start(b, b.at_us), UseResult::kStarted);
}

TEST(TokenBucket_Start, LateUseAfterTheNextStartedWaitsOneIntervalNotBehindEveryone) {
  TokenBucketLimiter l(10, kSec, 1);  // one per 100ms
  auto a = must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));  // +100ms
  std::vector<Slot> queue;
  for (int i = 0; i < 20; ++i) queue.push_back(must(l.reserve(kT0, kT0)));  // up to +2.1s
  ASSERT_EQ(*l.start(b, b.at_us), UseResult::kStarted);
  // a comes 50ms after b started: the next room is 100ms after b.
  EXPECT_EQ(*l.ready_at(a, kT0 + 150'000), kT0 + 200'000);
  EXPECT_EQ(*l.start(a, kT0 + 200'000), UseResult::kStarted);
}

TEST(TokenBucket_Start, StartsNeverExceedTheBucketWhateverTheLateness) {
  TokenBucketLimiter l(10, kSec, 2);
  std::vector<Slot> slots;
  for (int i = 0; i < 30; ++i) slots.push_back(must(l.reserve(kT0, kT0)));
  // Holders come in a shuffled order, some late: every start is checked
  // against the ones before it, so no second holds more than 10 + 2 - 1.
  std::vector<std::int64_t> starts;
  std::int64_t now = kT0;
  for (int k = 0; k < 30; ++k) {
    Slot& s = slots[static_cast<std::size_t>((k * 7) % 30)];
    now = std::max(now, s.at_us);
    while (*l.start(s, now) != UseResult::kStarted) now = s.at_us;
    starts.push_back(now);
  }
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 0; i < starts.size(); ++i) {
    std::size_t in_window = 0;
    for (std::size_t j = i; j < starts.size() && starts[j] < starts[i] + kSec; ++j) ++in_window;
    EXPECT_LE(in_window, 11u) << "window from start " << i;
  }
}

}  // namespace
}  // namespace ratchet::limit
