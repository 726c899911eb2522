// Pure pieces of the runtime: job backoff, argument checks, the basic
// template renderer.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "retry/backoff.hpp"
#include "retry/retry_decision.hpp"
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
  EXPECT_EQ(retry::backoff_delay(s, 1, {}, 0.5), 1s);
  EXPECT_EQ(retry::backoff_delay(s, 2, {}, 0.5), 2s);
  EXPECT_EQ(retry::backoff_delay(s, 5, {}, 0.5), 16s);
  EXPECT_EQ(retry::backoff_delay(s, 6, {}, 0.5), 30s);
  EXPECT_EQ(retry::backoff_delay(s, 60, {}, 0.5), 30s);
}

TEST(BackoffDelay, FullJitter_ScalesByTheDraw) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kFull);
  EXPECT_EQ(retry::backoff_delay(s, 3, {}, 0.0), 0s);
  EXPECT_EQ(retry::backoff_delay(s, 3, {}, 0.5), 2s);
  EXPECT_EQ(retry::backoff_delay(s, 3, {}, 0.25), 1s);
}

TEST(BackoffDelay, EqualJitter_KeepsAtLeastHalf) {
  auto s = spec(config::Backoff::kExponential, config::Jitter::kEqual);
  EXPECT_EQ(retry::backoff_delay(s, 3, {}, 0.0), 2s);
  EXPECT_EQ(retry::backoff_delay(s, 3, {}, 1.0), 4s);
}

TEST(BackoffDelay, ConstantAndLinear) {
  EXPECT_EQ(retry::backoff_delay(spec(config::Backoff::kConstant, config::Jitter::kNone), 7, {}, 0.3), 1s);
  EXPECT_EQ(retry::backoff_delay(spec(config::Backoff::kLinear, config::Jitter::kNone), 7, {}, 0.3), 7s);
}

TEST(BackoffDelay, Decorrelated_StaysBetweenInitialAndCap) {
  auto s = spec(config::Backoff::kDecorrelated, config::Jitter::kNone);
  for (double u : {0.0, 0.3, 0.99}) {
    auto d = retry::backoff_delay(s, 4, {}, u);
    EXPECT_GE(d, 1s);
    EXPECT_LE(d, 24s);
  }
}

// One backoff: the job's attempts follow the same sequence as a step call's
// retries given the same draws, decorrelated included.
TEST(JobBackoff, JobAttemptsAndCallRetriesGiveTheSameSequenceForASeed) {
  for (auto [kind, jitter] : {std::pair{config::Backoff::kDecorrelated, config::Jitter::kNone},
                              std::pair{config::Backoff::kExponential, config::Jitter::kFull},
                              std::pair{config::Backoff::kLinear, config::Jitter::kEqual}}) {
    config::RetrySpec r;
    r.attempts = 1000;
    r.backoff = spec(kind, jitter);
    r.backoff.max = std::chrono::minutes(10);
    const std::uint64_t seed = 42;
    const std::int64_t id = 7;
    const auto draws = job_backoff_draws(seed, id, 8);
    retry::RetryState state;
    const TimePoint now{};
    std::set<Duration> distinct;
    for (int k = 1; k <= 8; ++k) {
      auto v = retry::decide_retry(r, 24h, state, retry::Outcome::http(503), std::nullopt, now, draws[k - 1]);
      ASSERT_EQ(v.kind, retry::RetryVerdict::Kind::kRetry);
      EXPECT_EQ(job_backoff_delay(r.backoff, seed, id, k), v.at - now) << "attempt " << k;
      distinct.insert(v.at - now);
    }
    EXPECT_GT(distinct.size(), 4u);  // the draws really vary
  }
}

TEST(JobBackoff, TheSameJobAndSeedGiveTheSameDelay) {
  auto s = spec(config::Backoff::kDecorrelated, config::Jitter::kNone);
  EXPECT_EQ(job_backoff_delay(s, 1, 5, 4), job_backoff_delay(s, 1, 5, 4));
  for (int attempt : {1, 2, 5, 50}) {
    auto d = job_backoff_delay(s, 9, 3, attempt);
    EXPECT_GE(d, 1s);
    EXPECT_LE(d, 30s);
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

TEST(CheckArgs, NestedDeeperThanTheLimit_RefusedNamingTypeAndField) {
  nlohmann::json deep = 1;
  for (int i = 0; i < 60'000; ++i) deep = nlohmann::json::array({std::move(deep)});
  auto r = check_args("t", {}, {{"name", "x"}, {"tree", std::move(deep)}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("job type \"t\""), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("argument \"tree\""), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("64 levels"), std::string::npos) << r.error().message();
  nlohmann::json ok = 1;
  for (int i = 0; i < kMaxArgsDepth - 1; ++i) ok = nlohmann::json::array({std::move(ok)});
  EXPECT_TRUE(check_args("t", {}, {{"tree", std::move(ok)}}));
}

TEST(CheckArgs, LargerThanTheLimit_RefusedNamingTypeAndSize) {
  auto r = check_args("t", {}, {{"blob", std::string(kMaxArgsBytes + 1, 'x')}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("job type \"t\""), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("1 MiB"), std::string::npos) << r.error().message();
  EXPECT_TRUE(check_args("t", {}, {{"blob", std::string(kMaxArgsBytes / 2, 'x')}}));
}

TEST(CheckArgs, InvalidUtf8_RefusedNamingTheFieldWhateverItsDeclaredType) {
  for (auto type : {config::ArgType::kInteger, config::ArgType::kString, config::ArgType::kAny}) {
    auto r = check_args("t", {{"year", type, true}}, {{"year", "19\xff\xfe"}});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("argument \"year\""), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("UTF-8"), std::string::npos) << r.error().message();
  }
  auto nested = check_args("t", {}, {{"o", {{"k", {1, "\xc3"}}}}});
  ASSERT_FALSE(nested);
  EXPECT_NE(nested.error().message().find("/o/k/1"), std::string::npos) << nested.error().message();
}

}  // namespace
}  // namespace ratchet::runtime
