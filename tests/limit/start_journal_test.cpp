#include "limit/start_journal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "limit/keyed_journal.hpp"
#include "limit/keyed_limiters.hpp"
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

// Starts a call at the first time >= now the stack lets it; returns that time.
std::int64_t start_first_chance(LimiterStack& stack, std::int64_t now) {
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

  std::int64_t call(std::int64_t now) { return start_first_chance(stack, now); }
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

// A call may cost up to a million units, and its start is saved before its
// request leaves: saved a unit a row, it took longer than a count may age,
// and the request never left. It is one row, and the next process counts
// every unit of it.
TEST_P(StartJournalTest, ACallOfManyUnits_IsOneRowAndTheNextProcessCountsEveryUnit) {
  testing::LimiterTables db(GetParam());
  constexpr std::int64_t kHour = 3600 * kSec;
  constexpr std::int64_t kUnits = 100'000;
  {
    auto j = StartJournal::open("imdb", {.keep_us = kHour}, db.connect(), kT0);
    ASSERT_TRUE(j) << j.error().to_string();
    Slot s = *(*j)->reserve(kT0, kT0, kUnits);
    ASSERT_EQ(*(*j)->start(s, kT0), UseResult::kStarted);
  }
  auto conn = db.connect()();
  ASSERT_TRUE(conn);
  std::vector<std::pair<std::int64_t, std::int64_t>> rows;
  ASSERT_TRUE((*conn)->transact("test", "read", [&] { rows = (*conn)->journal_starts("imdb"); }));
  EXPECT_EQ(rows, (std::vector<std::pair<std::int64_t, std::int64_t>>{{kT0, kUnits}}));

  auto next = StartJournal::open("imdb", {.keep_us = kHour}, db.connect(), kT0 + kSec);
  ASSERT_TRUE(next) << next.error().to_string();
  SlidingWindowLimiter window(150'000, kHour);
  window.count_started((*next)->history(kT0 + kSec));
  EXPECT_EQ(*window.earliest(kT0 + kSec, kT0 + kSec, 50'000), kT0 + kSec);
  EXPECT_EQ(*window.earliest(kT0 + kSec, kT0 + kSec, 50'001), kT0 + kHour)
      << "the call's units count until it leaves the window";
}

// One process with a keyed limit of 3 per second per key, each key's
// window seeded from what the keyed journal read.
struct KeyedProcess {
  std::shared_ptr<KeyedJournal> journal;
  std::shared_ptr<KeyedLimiters> keys;

  KeyedProcess(const testing::LimiterTables& db, std::int64_t lease_calls, std::int64_t now) {
    auto tables = SharedLimiterTables::open(db.connect());
    EXPECT_TRUE(tables) << tables.error().to_string();
    auto j = KeyedJournal::open("imdb/3per1s", options(lease_calls), *tables, now);
    EXPECT_TRUE(j) << j.error().to_string();
    journal = *j;
    keys = std::make_shared<KeyedLimiters>(
        [j = journal, named = journal->enlist()](const std::string& key,
                                                 std::int64_t now_us) -> Result<std::shared_ptr<Limiter>> {
          auto window = std::make_shared<SlidingWindowLimiter>(3, kSec);
          auto history = j->history(key, now_us);
          if (!history) return fail(history.error());
          window->count_started(*history);
          return j->journaled(key, named, window);
        },
        kSec);
  }

  // Starts a call of `key` at the first time >= now it may; returns that time.
  std::int64_t call(const std::string& key, std::int64_t now) {
    auto limiter = keys->get(key, now);
    EXPECT_TRUE(limiter);
    LimiterStack stack({*limiter});
    return start_first_chance(stack, now);
  }
};

class KeyedJournalTest : public ::testing::TestWithParam<store::testing::Backend> {};

TEST_P(KeyedJournalTest, ProcessStoppedCleanly_EachKeyResumesItsOwnWindow) {
  testing::LimiterTables db(GetParam());
  {
    KeyedProcess before(db, 2, kT0);
    for (int i = 0; i < 3; ++i) before.call("alice", kT0 + i * 1'000);
    before.call("bob", kT0 + 5'000);
  }
  const std::int64_t later = kT0 + 500'000;
  KeyedProcess after(db, 2, later);
  EXPECT_EQ(after.call("alice", later), kT0 + kSec) << "alice's first start left the window";
  EXPECT_EQ(after.call("bob", later), later);
  EXPECT_EQ(after.call("bob", later), later);
  EXPECT_EQ(after.call("bob", later), kT0 + 5'000 + kSec) << "bob had one start in the window";
  EXPECT_EQ(after.call("carol", later), later) << "a key never used is free";
}

TEST_P(KeyedJournalTest, ProcessThatDiedWithALeaseOpen_EveryKeyCountsItsCallsAtTheLeaseEnd) {
  testing::LimiterTables db(GetParam());
  const testing::DeclaredLimit declared{config::LimitAlgorithm::kSlidingWindow, 3, kSec};
  std::vector<std::int64_t> alice;
  // Still open when the next one starts: what a killed process leaves.
  KeyedProcess died(db, 2, kT0);
  alice.push_back(died.call("alice", kT0));            // saved, with a lease on 2 more
  alice.push_back(died.call("alice", kT0 + 150'000));  // unsaved
  alice.push_back(died.call("alice", kT0 + 190'000));  // unsaved
  KeyedProcess next(db, 2, kT0 + 195'000);
  // The next process cannot tell which keys the unsaved calls were for.
  const std::int64_t bob = next.call("bob", kT0 + 195'000);
  EXPECT_EQ(bob, kT0 + 200'000) << "nothing starts before the lease's end";
  for (int i = 0; i < 4; ++i) alice.push_back(next.call("alice", kT0 + 195'000));
  std::sort(alice.begin(), alice.end());
  EXPECT_FALSE(testing::breach(declared, alice)) << *testing::breach(declared, alice);
  EXPECT_EQ(next.call("bob", kT0 + 195'000), kT0 + 200'000 + kSec)
      << "bob counts the lease's 2 calls and his own";
}

TEST_P(KeyedJournalTest, KeysNotSeenAgainArePrunedAsTheJournalSaves) {
  testing::LimiterTables db(GetParam());
  {
    KeyedProcess before(db, 1, kT0);
    for (int k = 0; k < 20; ++k) before.call("key-" + std::to_string(k), kT0 + k);
  }
  // Opened while they still count: the journal's first save past that
  // window prunes them.
  KeyedProcess after(db, 1, kT0 + 500'000);
  after.call("other", kT0 + 5 * kSec);
  after.journal.reset();
  after.keys.reset();
  auto conn = db.connect()();
  ASSERT_TRUE(conn);
  std::size_t left = 0;
  ASSERT_TRUE((*conn)->transact("test", "count", [&] {
    for (int k = 0; k < 20; ++k)
      left += (*conn)->journal_starts("imdb/3per1s#key-" + std::to_string(k)).size();
  }));
  EXPECT_EQ(left, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, KeyedJournalTest, ::testing::ValuesIn(store::testing::backends()),
                         store::testing::backend_name);

INSTANTIATE_TEST_SUITE_P(Backends, StartJournalTest, ::testing::ValuesIn(store::testing::backends()),
                         store::testing::backend_name);

}  // namespace
}  // namespace ratchet::limit
