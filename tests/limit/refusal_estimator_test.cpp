#include "limit/refusal_estimator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kSecond = 1'000'000;

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

TEST(RefusalEstimator, CallsAnsweredAfterTheRefusalThatEndedTheirStretch_CountThereAndKeepABucketABucket) {
  // nginx limit_req, 6 r/s burst=2 nodelay, in front of a portal 34 ms
  // away: it refuses at once and forwards the rest, so the first refusal
  // (at 49 ms) is answered before two calls admitted before it. Counted
  // in answer order, the first stretch held one call, a bucket of one or
  // two was all that fit it, the rate read was a bound of 2.4/s, and with
  // three calls admitted over the 1.05 s from the first to the second
  // stretch the server was taken for no bucket at all (then for a window
  // of one call a second).
  RefusalEstimator e;
  e.admitted(0);
  auto first = e.refused(49 * kMs, 1049 * kMs);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->admitted, 1);
  auto late = e.admitted(34 * kMs);
  ASSERT_TRUE(late.has_value()) << "a call of the stretch answered after its refusal is reported";
  EXPECT_TRUE(late->late);
  EXPECT_EQ(late->admitted, 2);
  late = e.admitted(42 * kMs);
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->admitted, 3);
  for (const std::int64_t t : {1049, 1598, 1718, 1804, 1871}) e.admitted(t * kMs);
  auto second = e.refused(1927 * kMs, 2927 * kMs);
  ASSERT_TRUE(second && second->rate);
  EXPECT_FALSE(second->not_a_bucket);
  // Three admitted from 0 to 1.049 s: a bucket refills that fast at least.
  EXPECT_GE(*second->rate * 1e6, 3 / 1.049);
  EXPECT_LE(*second->rate * 1e6, 6.5);
}

// What a GCRA bucket of 15 at 89/s answers to calls sent at `sends`
// (microseconds): the starts of the calls it admitted, and of the first it
// refused.
struct Answered {
  std::vector<std::int64_t> admitted;
  std::int64_t refused = 0;
};
Answered answer(double& tat, const std::vector<std::int64_t>& sends) {
  const double interval = 1e6 / 89;
  const double tau = 14 * interval;
  Answered out;
  for (const std::int64_t t : sends) {
    const auto at = static_cast<double>(t);
    if (tat - tau > at) {
      out.refused = t;
      return out;
    }
    tat = std::max(tat, at) + interval;
    out.admitted.push_back(t);
  }
  ADD_FAILURE() << "the stretch was never refused";
  return out;
}

// Feeds a stretch to the estimator, every admitted reply before the
// refusal's, and returns the refusal's reading.
std::optional<RefusalReading> feed(RefusalEstimator& e, const Answered& a) {
  for (const std::int64_t t : a.admitted) e.admitted(t);
  return e.refused(a.refused, a.refused + kSecond);
}

std::vector<std::int64_t> sends_at(std::int64_t from, double per_second, int n) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(from + static_cast<std::int64_t>(i * 1e6 / per_second));
  return out;
}

// The first stretch sends one call alone, then 150/s from 50 ms on: the
// lone call and the wait after it fall under B + r T, so the whole stretch
// is no point on the line. The second, from 2 s, sends at 60/s (the bucket
// stays full and overflows) for 0.4 s, then at 120/s.
std::vector<std::int64_t> first_sends() {
  std::vector<std::int64_t> sends{0};
  for (auto t : sends_at(50 * kMs, 150, 200)) sends.push_back(t);
  return sends;
}
std::vector<std::int64_t> second_sends() {
  std::vector<std::int64_t> sends = sends_at(2 * kSecond, 60, 24);
  for (auto t : sends_at(2 * kSecond + 400 * kMs, 120, 400)) sends.push_back(t);
  return sends;
}

TEST(RefusalEstimator, StretchesThatBeganSlowly_GiveTheBucketsRateAndSizeFromWhereEachDrained) {
  // A bucket of 15 at 89/s. Against the first stretch's whole, the second's
  // parts read about 101/s, and a pace that fast drew refusal after refusal.
  RefusalEstimator e;
  double tat = 0;
  ASSERT_TRUE(feed(e, answer(tat, first_sends())));
  auto reading = feed(e, answer(tat, second_sends()));
  ASSERT_TRUE(reading && reading->rate && reading->burst);
  EXPECT_NEAR(*reading->rate * 1e6, 89, 89 * 0.02);
  EXPECT_NEAR(*reading->burst, 15, 1.5);
}

TEST(RefusalEstimator, AdmittedRepliesThatComeAfterTheRefusal_AreCountedAndTheReadingTakenAgain) {
  // As above, but the replies of the second stretch's last four admitted
  // calls come after its refusal's (an admitted call may take longer to
  // answer than a refused one). Read without them the rate is too low; with
  // them, it is read again as if every reply had come first.
  RefusalEstimator e;
  double tat = 0;
  ASSERT_TRUE(feed(e, answer(tat, first_sends())));
  RefusalEstimator in_order = e;
  const Answered second = answer(tat, second_sends());
  const auto whole = feed(in_order, second);
  ASSERT_TRUE(whole && whole->rate);

  for (std::size_t i = 0; i + 4 < second.admitted.size(); ++i) e.admitted(second.admitted[i]);
  const auto early = e.refused(second.refused, second.refused + kSecond);
  ASSERT_TRUE(early);
  EXPECT_TRUE(!early->rate || *early->rate < *whole->rate * 0.98);
  std::optional<RefusalReading> last;
  for (std::size_t i = second.admitted.size() - 4; i < second.admitted.size(); ++i) {
    last = e.admitted(second.admitted[i]);
  }
  ASSERT_TRUE(last && last->rate);
  EXPECT_NEAR(*last->rate, *whole->rate, 1e-12);
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
