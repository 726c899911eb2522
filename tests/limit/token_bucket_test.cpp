#include "limit/token_bucket.hpp"

#include <gtest/gtest.h>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value());
  return r.value_or(Slot{});
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

TEST(TokenBucket_Start, LateUseBehindLaterSlotsIsMoved) {
  TokenBucketLimiter l(1, kSec, 1);
  auto a = must(l.reserve(kT0, kT0));
  auto b = must(l.reserve(kT0, kT0));
  ASSERT_EQ(*l.start(a, kT0 + 400'000), UseResult::kMoved);
  EXPECT_GT(a.at_us, b.at_us);
}

}  // namespace
}  // namespace ratchet::limit
