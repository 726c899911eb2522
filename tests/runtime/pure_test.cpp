// Pure pieces of the runtime: job backoff, argument checks, the basic
// template renderer.
#include <gtest/gtest.h>

#include "runtime/args_check.hpp"
#include "runtime/backoff.hpp"
#include "runtime/template_renderer.hpp"

namespace ratchet::runtime {
namespace {

using namespace std::chrono_literals;

config::BackoffSpec spec(config::Backoff kind, config::Jitter jitter) {
  config::BackoffSpec s;
  s.kind = kind;
  s.initial = 1s;
  s.max = 30s;
  s.multiplier = 2.0;
  s.jitter = jitter;
  return s;
}

TEST(BackoffDelay, ExponentialWithoutJitter_DoublesUpToMax) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kNone);
  EXPECT_EQ(backoff_delay(s, 1, 0.5), 1s);
  EXPECT_EQ(backoff_delay(s, 2, 0.5), 2s);
  EXPECT_EQ(backoff_delay(s, 5, 0.5), 16s);
  EXPECT_EQ(backoff_delay(s, 6, 0.5), 30s);
  EXPECT_EQ(backoff_delay(s, 60, 0.5), 30s);
}

TEST(BackoffDelay, FullJitter_ScalesByTheDraw) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kFull);
  EXPECT_EQ(backoff_delay(s, 3, 0.0), 0s);
  EXPECT_EQ(backoff_delay(s, 3, 0.5), 2s);
  EXPECT_EQ(backoff_delay(s, 3, 0.25), 1s);
}

TEST(BackoffDelay, EqualJitter_KeepsAtLeastHalf) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kEqual);
  EXPECT_EQ(backoff_delay(s, 3, 0.0), 2s);
  EXPECT_EQ(backoff_delay(s, 3, 1.0), 4s);
}

TEST(BackoffDelay, ConstantAndLinear) {
  EXPECT_EQ(backoff_delay(spec(config::Backoff::kConstant, config::Jitter::kNone), 7, 0.3), 1s);
  EXPECT_EQ(backoff_delay(spec(config::Backoff::kLinear, config::Jitter::kNone), 7, 0.3), 7s);
}

TEST(BackoffDelay, Decorrelated_StaysBetweenInitialAndCap) {
  auto s = spec(config::Backoff::kDecorrelated, config::Jitter::kNone);
  for (double u : {0.0, 0.3, 0.99}) {
    auto d = backoff_delay(s, 4, u);
    EXPECT_GE(d, 1s);
    EXPECT_LE(d, 24s);
  }
}

TEST(CheckArgs, NoDeclaration_AnyObjectButNotOtherJson) {
  EXPECT_TRUE(check_args("t", {}, {{"x", 1}}));
  auto r = check_args("t", {}, "text");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("object"), std::string::npos);
}

TEST(CheckArgs, IntegerFieldGivenAFraction_Refused) {
  auto r = check_args("t", {{"n", config::ArgType::kInteger, true}}, {{"n", 1.5}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("\"n\" must be an integer"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace ratchet::runtime
