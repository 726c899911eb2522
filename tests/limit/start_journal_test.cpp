#include "limit/start_journal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "limit/limiter_stack.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit_checks.hpp"
#include "limiter_tables.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

StartJournal::Options options(std::int64_t lease_calls) {
  StartJournal::Options o;
  o.keep_us = kSec;
  o.lease_us = 200'000;
  o.lease_calls = lease_calls;
  return o;
}

// One process: a 3-per-second window and the journal of its owner, the
// window seeded from what the journal read.
struct Process {
  std::shared_ptr<StartJournal> journal;
  std::shared_ptr<SlidingWindowLimiter> window;
  LimiterStack stack;

  Process(const testing::LimiterTables& db, std::int64_t lease_calls, std::int64_t now) {
    auto j = StartJournal::open("imdb", options(lease_calls), db.connect(), now);
    EXPECT_TRUE(j) << j.error().to_string();
    journal = *j;
    window = std::make_shared<SlidingWindowLimiter>(3, kSec);
    window->count_started(journal->history(now));
    stack = LimiterStack({window, journal});
  }

  // Starts a call at the first time >= now it may; returns that time.
  std::int64_t call(std::int64_t now) {
    for (int i = 0; i < 10; ++i) {
      auto r = stack.reserve(from_micros(now));
      EXPECT_TRUE(r);
      now = std::max(now, to_micros(r->at()));
      auto go = stack.start(*r, from_micros(now));
      EXPECT_TRUE(go);
      if (*go) return now;
    }
    ADD_FAILURE() << "no start";
    return now;
  }
};

// Conformance cases: the journal's rows, on every store backend
// (tests/store/backends.hpp).
class StartJournalTest : public ::testing::TestWithParam<store::testing::Backend> {};

TEST_P(StartJournalTest, ProcessStoppedCleanly_TheNextOneResumesItsWindow) {
  testing::LimiterTables db(GetParam());
  std::vector<std::int64_t> starts;
  {
    Process before(db, 2, kT0);
    for (int i = 0; i < 3; ++i) starts.push_back(before.call(kT0 + i * 1'000));
  }
  Process after(db, 2, kT0 + 500'000);
  EXPECT_EQ(after.journal->history(kT0 + 500'000).size(), 3u);
  starts.push_back(after.call(kT0 + 500'000));
  EXPECT_EQ(starts.back(), kT0 + kSec) << "the first start left the window";
}

TEST_P(StartJournalTest, ProcessThatDiedWithUnsavedStarts_TheNextOneCountsThemAtTheLeaseEnd) {
  testing::LimiterTables db(GetParam());
  const testing::DeclaredLimit declared{config::LimitAlgorithm::kSlidingWindow, 3, kSec};
  std::vector<std::int64_t> starts;
  // Still open when the next one starts: what a killed process leaves.
  Process died(db, 2, kT0);
  starts.push_back(died.call(kT0));            // saved, with a lease on 2 more
  starts.push_back(died.call(kT0 + 150'000));  // unsaved
  starts.push_back(died.call(kT0 + 190'000));  // unsaved
  Process next(db, 2, kT0 + 195'000);
  for (int i = 0; i < 6; ++i) starts.push_back(next.call(kT0 + 195'000));
  std::sort(starts.begin(), starts.end());
  EXPECT_FALSE(testing::breach(declared, starts)) << *testing::breach(declared, starts);
  EXPECT_GE(starts[3], kT0 + 200'000) << "nothing before the lease's end";
}

INSTANTIATE_TEST_SUITE_P(Backends, StartJournalTest, ::testing::ValuesIn(store::testing::backends()),
                         store::testing::backend_name);

}  // namespace
}  // namespace ratchet::limit
