#include "limit/refusal_estimator.hpp"

#include <gtest/gtest.h>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;

// A stretch of `n` calls admitted `spacing` apart from `from`.
void admit(RefusalEstimator& e, std::int64_t from, int n, std::int64_t spacing) {
  for (int i = 0; i < n; ++i) e.admitted(from + i * spacing);
}

TEST(RefusalEstimator, TwoStretches_RateIsTheirDifferenceOverTheirLengths) {
  RefusalEstimator e;
  admit(e, 0, 20, 10 * kMs);  // 20 admitted in 0.2 s
  auto first = e.refused(200 * kMs, 1200 * kMs);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(first->rate.has_value()) << "one stretch cannot tell size from rate";
  EXPECT_EQ(first->admitted, 20);
  EXPECT_EQ(first->length_us, 200 * kMs);
  admit(e, 1200 * kMs, 50, 16 * kMs);  // 50 admitted in 0.8 s
  auto second = e.refused(2000 * kMs, 3000 * kMs);
  ASSERT_TRUE(second && second->rate);
  EXPECT_NEAR(*second->rate * 1e6, 50.0, 1e-9);  // (50 - 20) / (0.8 - 0.2)
  ASSERT_TRUE(second->burst);
  EXPECT_NEAR(*second->burst, 10.0, 1e-6);  // 20 - 50/s * 0.2 s
  EXPECT_FALSE(second->not_a_bucket);
}

TEST(RefusalEstimator, AServerThatAdmitsItsQuotaWhateverTheStretch_IsNoBucketAndTellsNoRate) {
  // 20 admitted in 0.2 s, then a pause to 1.2 s: a bucket of rate r admits
  // at most r * 1.2 s over the two. The next stretch, 0.8 s long, admits
  // 24: read as a bucket, 4 more in 0.6 s more, 6.7/s, which could not
  // have admitted 20 in 1.2 s. A fixed window of 20 a second does this.
  RefusalEstimator e;
  admit(e, 0, 20, 10 * kMs);
  ASSERT_TRUE(e.refused(200 * kMs, 1200 * kMs));
  admit(e, 1200 * kMs, 24, 33 * kMs);
  auto second = e.refused(2000 * kMs, 3000 * kMs);
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(second->rate.has_value());
  EXPECT_TRUE(second->not_a_bucket);
}

TEST(RefusalEstimator, ReplyArrivingAfterTheRefusal_CountsInTheStretchItStartedIn) {
  RefusalEstimator e;
  admit(e, 0, 20, 9 * kMs);
  auto first = e.refused(200 * kMs, 1200 * kMs);
  ASSERT_TRUE(first.has_value());
  // Two calls started before the refused one; their replies came after it.
  e.admitted(195 * kMs);
  e.admitted(198 * kMs);
  admit(e, 1200 * kMs, 50, 16 * kMs);
  auto second = e.refused(2000 * kMs, 3000 * kMs);
  ASSERT_TRUE(second && second->rate);
  // The first stretch admitted 22, not 20: (50 - 22) / 0.6 s. Left out, the
  // late replies would read the rate too high, and the pace would draw 429s.
  EXPECT_NEAR(*second->rate * 1e6, 28.0 / 0.6, 1e-9);
}

TEST(RefusalEstimator, RefusalOfACallInFlightAtTheLastOne_ReadsNothing) {
  RefusalEstimator e;
  admit(e, 0, 10, 10 * kMs);
  ASSERT_TRUE(e.refused(100 * kMs, 1100 * kMs).has_value());
  EXPECT_FALSE(e.refused(99 * kMs, 1100 * kMs).has_value());
}

}  // namespace
}  // namespace ratchet::limit
