#include "limit/bucket_fit.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;

// What a GCRA bucket of `burst` refilled `rate` times a second answers to
// calls started at `sends` (milliseconds), each fed to `fit`.
void answer(BucketFit& fit, double rate, double burst, const std::vector<std::int64_t>& sends) {
  const double interval = 1e6 / rate;
  const double tau = (burst - 1) * interval;
  double tat = -1e18;
  for (const std::int64_t ms : sends) {
    const auto t = static_cast<double>(ms * kMs);
    const bool admitted = t >= tat - tau;
    if (admitted) tat = std::max(tat, t) + interval;
    fit.answered(ms * kMs, admitted);
  }
}

TEST(BucketFit, AReadingThatFitsEveryAnswerStands) {
  BucketFit fit;
  std::vector<std::int64_t> sends;
  for (std::int64_t t = 0; t < 400; t += 10) sends.push_back(t);      // 100/s from a full bucket
  for (std::int64_t t = 1400; t < 2400; t += 22) sends.push_back(t);  // after a pause, 45/s
  answer(fit, 40, 10, sends);
  const BucketShape read{40e-6, 10};
  EXPECT_TRUE(fit.fits(read));
  const BucketShape kept = fit.fit(read);
  EXPECT_DOUBLE_EQ(kept.rate, read.rate);
  EXPECT_DOUBLE_EQ(kept.burst, read.burst);
}

TEST(BucketFit, ARateReadFarUnderASmallBucketsIsMovedToTheSpanItsAnswersAllow) {
  // A bucket of one refilled 8 times a second, as a slow start met it: the
  // first call admitted and the next, 17 ms later, refused; after the
  // pause, calls 496 ms, 125 ms and 89 ms apart, the last refused. Read at
  // 2.8 a second, it would have refused the call 125 ms after the last.
  BucketFit fit;
  answer(fit, 8, 1, {0, 17, 25, 32, 1049, 1545, 1670, 1759});
  const BucketShape read{2.83e-6, 0.95};  // as the bound under it reads it
  EXPECT_FALSE(fit.fits(read));
  const BucketShape moved = fit.fit(read);
  EXPECT_GE(moved.rate * 1e6, 8.0 / 1.03);  // admitted 125 ms apart, give or take the jitter allowed
  EXPECT_LT(moved.rate * 1e6, 1e3 / 86);    // refused 89 ms apart
  EXPECT_DOUBLE_EQ(moved.burst, 1);         // the second of two calls 17 ms apart was refused
}

TEST(BucketFit, AnswersNoBucketGivesLeaveTheReadingAsItIs) {
  // A fixed window of 20 a second: 20 admitted at the end of one window
  // and 20 more at the start of the next, 84 ms later (a bucket refilling
  // faster than 198 a second), then 20 of 100 sent at 100 a second (one
  // refilling slower than 100).
  BucketFit fit;
  std::vector<std::int64_t> sends;
  for (int i = 0; i < 22; ++i) sends.push_back(900 + i * 4);
  for (int i = 0; i < 22; ++i) sends.push_back(1000 + i * 4);
  for (int i = 0; i < 100; ++i) sends.push_back(2000 + i * 10);
  std::int64_t window = -1;
  int count = 0;
  for (const std::int64_t ms : sends) {
    if (ms / 1000 != window) {
      window = ms / 1000;
      count = 0;
    }
    fit.answered(ms * kMs, ++count <= 20);
  }
  const BucketShape read{20e-6, 20};
  EXPECT_FALSE(fit.fits(read));
  const BucketShape kept = fit.fit(read);
  EXPECT_DOUBLE_EQ(kept.rate, read.rate);
  EXPECT_DOUBLE_EQ(kept.burst, read.burst);
  EXPECT_FALSE(fit.midst());
}

TEST(BucketFit, TheSlowestBucketFromABoundIsOneThatFitsAnswersInAnyOrder) {
  // A bucket of three at 6/s. The call refused at 49 ms is answered before
  // two admitted before it (a proxy that refuses at once): the sizes tried
  // are bounded by the calls started, not answered, before the first
  // refusal, or no bucket of three is ever tried.
  BucketFit fit;
  fit.answered(0, true);
  fit.answered(49 * kMs, false);
  fit.answered(34 * kMs, true);
  fit.answered(42 * kMs, true);
  for (const std::int64_t t : {1049, 1598, 1718, 1804, 1871}) fit.answered(t * kMs, true);
  fit.answered(1927 * kMs, false);
  EXPECT_TRUE(fit.fits({6e-6, 3}));
  EXPECT_FALSE(fit.fits({2e-6, 2})) << "two can't hold the three admitted at once";
  const auto raised = fit.slowest_from(3 / 1.049e6, 3);
  ASSERT_TRUE(raised.has_value());
  EXPECT_GE(raised->rate * 1e6, 3 / 1.049);
  EXPECT_TRUE(fit.fits(*raised));
  for (const double b : {1, 2, 3, 4}) {
    EXPECT_FALSE(fit.fits({raised->rate / 1.02, b})) << "the slowest that fits, on a grid a percent apart";
  }
  EXPECT_EQ(raised->burst, 3);
  // Past the fastest that refuses the call at 1.927 s, nothing fits.
  EXPECT_FALSE(fit.slowest_from(20e-6, 3).has_value());
}

TEST(BucketFit, TheFastestRateTheAnswersAllowIsWhereAPaceReadLowMayRiseTo) {
  // A bucket of five refilled 20 times a second, sent to at 25/s for a
  // second from full, then after a pause at 10/s: from the slowest rate
  // that fits, the pace may rise to the fastest rate no answer rules out,
  // which is at least the server's and, with the refusals of the drain at
  // 25/s, under that.
  BucketFit fit;
  std::vector<std::int64_t> sends;
  for (std::int64_t t = 0; t < 1000; t += 40) sends.push_back(t);
  for (std::int64_t t = 2000; t < 4000; t += 100) sends.push_back(t);
  answer(fit, 20, 5, sends);
  const auto slowest = fit.slowest_from(15e-6, 5);
  ASSERT_TRUE(slowest.has_value());
  EXPECT_LE(slowest->rate * 1e6, 20);
  const auto fastest = fit.fastest_from(slowest->rate);
  ASSERT_TRUE(fastest.has_value());
  EXPECT_GE(*fastest * 1e6, 20 * 0.99);
  EXPECT_LT(*fastest * 1e6, 25);
  // A rate no bucket of these answers refills at: nothing to rise to.
  EXPECT_FALSE(fit.fastest_from(40e-6).has_value());
}

TEST(BucketFit, WithNoReading_ARateInsideTheSpanTheAnswersAllowOnceTheyBoundItBothWays) {
  BucketFit fit;
  answer(fit, 5, 1, {0, 10, 18});
  EXPECT_FALSE(fit.midst()) << "a refusal alone bounds the rate one way only";
  answer(fit, 5, 1, {1028, 1527, 1652});  // 499 ms apart admitted, 125 ms refused
  const auto shape = fit.midst();
  ASSERT_TRUE(shape);
  EXPECT_DOUBLE_EQ(shape->burst, 1);
  const double interval_ms = 1e-3 / shape->rate;
  EXPECT_GT(interval_ms, 125 - 3);  // refused 125 ms after the last, give or take the jitter allowed
  EXPECT_LE(interval_ms, 499 + 3);  // admitted 499 ms after it
  // Nearer the fast end of the span: a refusal costs a pause, a slow rate every call after it.
  EXPECT_LT(interval_ms, 250);
}

}  // namespace
}  // namespace ratchet::limit
