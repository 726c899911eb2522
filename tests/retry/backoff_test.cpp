#include "retry/backoff.hpp"

#include <gtest/gtest.h>

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;

config::BackoffSpec spec(config::Backoff kind, config::Jitter jitter = config::Jitter::kNone) {
  config::BackoffSpec s;
  s.kind = kind;
  s.initial = 200ms;
  s.max = 30s;
  s.multiplier = 2.0;
  s.jitter = jitter;
  return s;
}

TEST(Backoff_Shapes, ConstantLinearExponentialGrowAsDeclared) {
  auto c = spec(config::Backoff::kConstant);
  auto l = spec(config::Backoff::kLinear);
  auto e = spec(config::Backoff::kExponential);
  EXPECT_EQ(backoff_delay(c, 1, {}, 0.5), 200ms);
  EXPECT_EQ(backoff_delay(c, 7, {}, 0.5), 200ms);
  EXPECT_EQ(backoff_delay(l, 1, {}, 0.5), 200ms);
  EXPECT_EQ(backoff_delay(l, 3, {}, 0.5), 600ms);
  EXPECT_EQ(backoff_delay(e, 1, {}, 0.5), 200ms);
  EXPECT_EQ(backoff_delay(e, 2, {}, 0.5), 400ms);
  EXPECT_EQ(backoff_delay(e, 5, {}, 0.5), 3200ms);
}

TEST(Backoff_Shapes, EveryShapeIsCappedAtMaxEvenForHugeRetryNumbers) {
  for (auto kind : {config::Backoff::kConstant, config::Backoff::kLinear, config::Backoff::kExponential,
                    config::Backoff::kDecorrelated}) {
    auto s = spec(kind);
    s.initial = 10s;
    for (int retry : {1, 10, 100, 10000, 2'000'000'000}) {
      EXPECT_LE(backoff_delay(s, retry, 25s, 0.999), 30s);
      EXPECT_GE(backoff_delay(s, retry, 25s, 0.0), 0s);
    }
  }
}

TEST(Backoff_Jitter, FullSpansZeroToTheDelay) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kFull);
  EXPECT_EQ(backoff_delay(s, 3, {}, 0.0), 0s);
  EXPECT_EQ(backoff_delay(s, 3, {}, 0.5), 400ms);
  EXPECT_LT(backoff_delay(s, 3, {}, 0.9999), 800ms);
}

TEST(Backoff_Jitter, EqualKeepsAtLeastHalf) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kEqual);
  EXPECT_EQ(backoff_delay(s, 3, {}, 0.0), 400ms);
  EXPECT_EQ(backoff_delay(s, 3, {}, 0.5), 600ms);
}

TEST(Backoff_Decorrelated, DrawsBetweenInitialAndThreeTimesThePrevious) {
  auto s = spec(config::Backoff::kDecorrelated);
  EXPECT_EQ(backoff_delay(s, 1, 0s, 0.7), 200ms);  // nothing before: initial
  EXPECT_EQ(backoff_delay(s, 2, 1s, 0.0), 200ms);
  EXPECT_EQ(backoff_delay(s, 2, 1s, 0.5), 1600ms);  // 0.2 + 0.5 * (3 - 0.2)
}

TEST(Backoff_Jitter, OutOfRangeRandomNumbersAreClamped) {
  auto s = spec(config::Backoff::kConstant, config::Jitter::kFull);
  EXPECT_EQ(backoff_delay(s, 1, {}, -3.0), 0s);
  EXPECT_EQ(backoff_delay(s, 1, {}, 7.0), 200ms);
}

}  // namespace
}  // namespace ratchet::retry
