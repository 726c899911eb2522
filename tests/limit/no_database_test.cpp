// Limiters that need no database: specs refused before any connection, and a
// start journal without one. The cases on a database's rows run on every
// store backend (database_limiter_test.cpp, start_journal_test.cpp).
#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "limit/make_limiter.hpp"
#include "limit/start_journal.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;
constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

config::LimitSpec spec(config::LimitAlgorithm algo, std::int64_t rate, std::chrono::microseconds per) {
  config::LimitSpec s;
  s.algorithm = algo;
  s.rate = rate;
  s.per = per;
  s.scope = config::LimitScope::kDatabase;
  return s;
}

StartJournal::Options options(std::int64_t lease_calls) {
  StartJournal::Options o;
  o.keep_us = kSec;
  o.lease_us = 200'000;
  o.lease_calls = lease_calls;
  return o;
}

TEST(MakeLimiter, DatabaseScopeWithoutAConnectionIsRefused) {
  auto l = make_limiter(spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s), "k");
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code(), ErrorCode::kInvalidArgument);
}

TEST(MakeLimiter, NonPositiveRateIsRefused) {
  auto s = spec(config::LimitAlgorithm::kSlidingWindow, 0, 1s);
  s.scope = config::LimitScope::kProcess;
  EXPECT_FALSE(make_limiter(s, "k"));
}

TEST(MakeLimiter, RateBurstOrPerAboveTheirMaximumIsRefused) {
  // Refused before any connection is made.
  const ConnectionFactory never = []() -> Result<std::unique_ptr<store::LimiterTables>> {
    ADD_FAILURE() << "connected";
    return fail(Error::database("no database here"));
  };
  for (auto scope : {config::LimitScope::kProcess, config::LimitScope::kDatabase}) {
    auto rate = spec(config::LimitAlgorithm::kSlidingWindow, std::numeric_limits<std::int64_t>::max(), 1s);
    rate.scope = scope;
    auto burst = spec(config::LimitAlgorithm::kTokenBucket, 10, 1s);
    burst.burst = std::numeric_limits<std::int64_t>::max();
    burst.scope = scope;
    auto per = spec(config::LimitAlgorithm::kFixedWindow, 10, std::chrono::hours(24 * 366));
    per.scope = scope;
    for (const auto& s : {rate, burst, per}) {
      auto l = make_limiter(s, "k", never);
      ASSERT_FALSE(l);
      EXPECT_NE(l.error().message().find("at most"), std::string::npos) << l.error().message();
    }
  }
}

TEST(StartJournal, WithoutADatabase_HandsItsHistoryOnAndNeverWaits) {
  auto j = StartJournal::open("imdb", options(2), {}, kT0);
  ASSERT_TRUE(j);
  Slot s = *(*j)->reserve(kT0, kT0);
  ASSERT_EQ(s.at_us, kT0);
  ASSERT_EQ(*(*j)->start(s, kT0 + 5), UseResult::kStarted);
  EXPECT_EQ((*j)->history(kT0 + 10), (std::vector<Start>{{.at_us = kT0 + 5, .units = 1}}));
  ASSERT_TRUE((*j)->cancel(s));
  EXPECT_TRUE((*j)->history(kT0 + 10).empty());
}

}  // namespace
}  // namespace ratchet::limit
