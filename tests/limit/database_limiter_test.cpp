#include "limit/database_limiter.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "limit/key_identity.hpp"
#include "limit/keyed_limiters.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"
#include "limit_checks.hpp"
#include "limiter_tables.hpp"
#include "stall_replay.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;
constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;

config::LimitSpec spec(config::LimitAlgorithm algo, std::int64_t rate, std::chrono::microseconds per,
                       std::optional<std::int64_t> burst = std::nullopt) {
  config::LimitSpec s;
  s.algorithm = algo;
  s.rate = rate;
  s.per = per;
  s.burst = burst;
  s.scope = config::LimitScope::kDatabase;
  return s;
}

std::shared_ptr<DatabaseLimiter> open(const testing::LimiterTables& db, const config::LimitSpec& s,
                                      const std::string& key = "imdb/day") {
  auto l = DatabaseLimiter::open(s, key, db.connect());
  EXPECT_TRUE(l) << (l ? "" : l.error().to_string());
  return l ? *l : nullptr;
}

// Conformance cases: each runs on every store backend (tests/store/backends.hpp).
class DatabaseLimiterTest : public ::testing::TestWithParam<store::testing::Backend> {
 protected:
  ratchet::testing::TempDir dir_;
};

std::int64_t must(Result<std::int64_t> r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r.value_or(-1);
}

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r.value_or(Slot{});
}

TEST_P(DatabaseLimiterTest, Sliding_TwoConnectionsShareOneLimit) {
  testing::LimiterTables db(GetParam());
  auto s = spec(config::LimitAlgorithm::kSlidingWindow, 3, 86400s);
  auto p1 = open(db, s);
  auto p2 = open(db, s);
  EXPECT_EQ(must(p1->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(p2->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(p1->reserve(kT0 + kSec, kT0)).at_us, kT0 + kSec);
  // The daily quota of 3 is used up across both connections.
  EXPECT_EQ(must(p2->reserve(kT0 + kSec, kT0)).at_us, kT0 + 86400 * kSec);
}

TEST_P(DatabaseLimiterTest, Sliding_QuotaSurvivesARestart) {
  testing::LimiterTables db(GetParam());
  auto s = spec(config::LimitAlgorithm::kSlidingWindow, 2, 86400s);
  {
    auto before = open(db, s);
    must(before->reserve(kT0, kT0));
    must(before->reserve(kT0, kT0));
  }
  auto after = open(db, s);  // a new process opening the same file
  EXPECT_EQ(must(after->reserve(kT0 + 3600 * kSec, kT0)).at_us, kT0 + 86400 * kSec);
}

// A sliding window's count is a log of calls: processes at two rates over
// one name (a config change rolled out to one and not yet to the other,
// database_limit_name) count the same calls, each against its own rate.
TEST_P(DatabaseLimiterTest, Sliding_TwoRatesOverOneName_CountTheSameCallsEachAgainstItsOwnRate) {
  testing::LimiterTables db(GetParam());
  auto old_rate = open(db, spec(config::LimitAlgorithm::kSlidingWindow, 2, 86400s));
  auto new_rate = open(db, spec(config::LimitAlgorithm::kSlidingWindow, 3, 86400s));
  EXPECT_EQ(must(old_rate->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(old_rate->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(old_rate->reserve(kT0, kT0)).at_us, kT0 + 86400 * kSec) << "2 a day, 2 made";
  EXPECT_EQ(must(new_rate->reserve(kT0 + kSec, kT0)).at_us, kT0 + kSec) << "3 a day, 2 made";
  EXPECT_EQ(must(new_rate->reserve(kT0 + kSec, kT0)).at_us, kT0 + 86400 * kSec);
}

TEST_P(DatabaseLimiterTest, Sliding_KeysAreIndependent) {
  testing::LimiterTables db(GetParam());
  auto s = spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s);
  auto a = open(db, s, "a");
  auto b = open(db, s, "b");
  EXPECT_EQ(must(a->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(b->reserve(kT0, kT0)).at_us, kT0);
}

// As in process scope: a late holder takes the room there is when it comes,
// counted then, and the next holder waits a little in its place.
TEST_P(DatabaseLimiterTest, Sliding_LateStartIsCountedWhenItHappensAndTheNextHolderWaitsInPlace) {
  testing::LimiterTables db(GetParam());
  auto l = open(db, spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s));
  auto a = must(l->reserve(kT0, kT0));
  auto b = must(l->reserve(kT0, kT0));
  ASSERT_EQ(b.at_us, kT0 + kSec);
  auto used = l->start(a, kT0 + 500'000);
  ASSERT_TRUE(used);
  EXPECT_EQ(*used, UseResult::kStarted);
  EXPECT_EQ(a.at_us, kT0 + 500'000);
  auto ready = l->ready_at(b, kT0 + kSec);
  ASSERT_TRUE(ready);
  EXPECT_EQ(*ready, kT0 + 1'500'000);
  ASSERT_TRUE(l->cancel(b));
  // Only `a` (started at +0.5s) remains.
  auto c = must(l->reserve(kT0 + 600'000, kT0));
  EXPECT_EQ(c.at_us, kT0 + 1'500'000);
}

TEST_P(DatabaseLimiterTest, Sliding_OldRowsArePruned) {
  testing::LimiterTables db(GetParam());
  auto l = open(db, spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s));
  for (int i = 0; i < 5; ++i) must(l->reserve(kT0 + i * kSec, kT0 + i * kSec));
  EXPECT_LE(db.entries(store::LimiterLog::kCalls, "imdb/day"), 2);
}

TEST_P(DatabaseLimiterTest, TokenBucket_BurstThenPaceAcrossConnections) {
  testing::LimiterTables db(GetParam());
  auto s = spec(config::LimitAlgorithm::kTokenBucket, 10, 1s, 2);
  auto p1 = open(db, s, "bucket");
  auto p2 = open(db, s, "bucket");
  EXPECT_EQ(must(p1->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(p2->reserve(kT0, kT0)).at_us, kT0);
  EXPECT_EQ(must(p1->reserve(kT0, kT0)).at_us, kT0 + 100'000);
  auto last = must(p2->reserve(kT0, kT0));
  EXPECT_EQ(last.at_us, kT0 + 200'000);
  ASSERT_TRUE(p1->cancel(last));  // the latest slot comes back, even via another connection
  EXPECT_EQ(must(p1->reserve(kT0, kT0)).at_us, kT0 + 200'000);
}

TEST_P(DatabaseLimiterTest, FixedWindow_CountsPerEpochAlignedWindow) {
  testing::LimiterTables db(GetParam());
  auto l = open(db, spec(config::LimitAlgorithm::kFixedWindow, 2, 60s), "fixed");
  const std::int64_t mid = kT0 + 30 * kSec;
  const std::int64_t window_end = (mid / (60 * kSec) + 1) * 60 * kSec;
  EXPECT_EQ(must(l->reserve(mid, mid)).at_us, mid);
  EXPECT_EQ(must(l->reserve(mid, mid)).at_us, mid);
  EXPECT_EQ(must(l->reserve(mid, mid)).at_us, window_end);
}

// Weighted calls: a call of u units is u units of the shared budget for every
// connection, and a correction after the reply reaches every connection too.
TEST_P(DatabaseLimiterTest, Weighted_UnitsAndCorrectionsAreSharedByEveryConnection) {
  testing::LimiterTables db(GetParam());
  for (auto algo : {config::LimitAlgorithm::kSlidingWindow, config::LimitAlgorithm::kFixedWindow,
                    config::LimitAlgorithm::kTokenBucket}) {
    SCOPED_TRACE(static_cast<int>(algo));
    const std::string key = "weighted/" + std::to_string(static_cast<int>(algo));
    // 10 units per day; the bucket holds all 10 at once.
    auto s = spec(algo, 10, 86400s, algo == config::LimitAlgorithm::kTokenBucket ? 10 : 1);
    if (algo != config::LimitAlgorithm::kTokenBucket) s.burst.reset();
    auto p1 = open(db, s, key);
    auto p2 = open(db, s, key);
    const std::int64_t t = kT0 + 86400 * kSec * (1 + static_cast<int>(algo)) - 12 * 3600 * kSec;
    Slot a = must(p1->reserve(t, t, 4));
    ASSERT_TRUE(p1->start(a, t).has_value());
    Slot b = must(p2->reserve(t, t, 4));
    EXPECT_EQ(b.at_us, t);
    ASSERT_TRUE(p2->start(b, t).has_value());
    // 8 of 10 spent: 2 more fit on either connection, 3 do not.
    EXPECT_EQ(must(p1->earliest(t, t, 2)), t);
    EXPECT_GT(must(p2->earliest(t, t, 3)), t);
    // The first call really cost 1: three units come back (exact for the
    // bucket only while it is the latest charge, so it is corrected last).
    ASSERT_TRUE(p2->adjust(b, 1, t).has_value());
    EXPECT_EQ(must(p1->earliest(t, t, 5)), t);
    EXPECT_GT(must(p1->earliest(t, t, 6)), t);
    // And an overdraft: nothing fits until the window (or bucket) has room.
    ASSERT_TRUE(p1->adjust(a, 12, t).has_value());
    EXPECT_GT(must(p2->earliest(t, t, 1)), t);
  }
}

TEST_P(DatabaseLimiterTest, Open_MissingTablesAreAClearDatabaseError) {
  // A database ratchet never opened: an empty SQLite file, an empty schema.
  store::StoreOptions o;
  o.database = GetParam().fresh_database(dir_);
  GetParam().exec(o.database, "SELECT 1");
  auto l = DatabaseLimiter::open(spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s), "k",
                                 store::limiter_tables_for(o));
  ASSERT_TRUE(l) << l.error().to_string();
  auto r = (*l)->reserve(kT0, kT0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(r.error().message().find("limiter k"), std::string::npos) << r.error().message();
}

TEST_P(DatabaseLimiterTest, Open_UnreachableDatabaseIsADatabaseError) {
  store::StoreOptions o;
  o.database = GetParam().unreachable;
  auto l = DatabaseLimiter::open(spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s), "k",
                                 store::limiter_tables_for(o));
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(l.error().message().find("limiter k"), std::string::npos) << l.error().message();
}

TEST_P(DatabaseLimiterTest, Concurrency_ThreadsOnTwoConnectionsNeverOverbook) {
  testing::LimiterTables db(GetParam());
  auto s = spec(config::LimitAlgorithm::kSlidingWindow, 3, 1s);
  auto p1 = open(db, s, "shared");
  auto p2 = open(db, s, "shared");
  std::vector<std::int64_t> all;
  std::mutex mu;
  auto run = [&](DatabaseLimiter* l) {
    for (int i = 0; i < 15; ++i) {
      auto slot = l->reserve(kT0, kT0);
      ASSERT_TRUE(slot) << slot.error().to_string();
      std::lock_guard lock(mu);
      all.push_back(slot->at_us);
    }
  };
  std::thread t1(run, p1.get());
  std::thread t2(run, p2.get());
  t1.join();
  t2.join();
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 30u);
  for (std::size_t i = 3; i < all.size(); ++i) EXPECT_GE(all[i] - all[i - 3], kSec);
  EXPECT_EQ(all.back(), kT0 + 9 * kSec);  // and no slot wasted
}

// Two "processes" (connections) stack the same three database limits; callers
// arrive at random, start on time or late, or give their slot back. The starts
// never break any of the limits.
TEST_P(DatabaseLimiterTest, Random_TwoConnectionsWithLateStartsAndCancelsNeverExceedAnyLimit) {
  testing::LimiterTables db(GetParam());
  const std::vector<testing::DeclaredLimit> declared = {
      {config::LimitAlgorithm::kSlidingWindow, 4, kSec},
      {config::LimitAlgorithm::kTokenBucket, 3, kSec, 2},
      {config::LimitAlgorithm::kFixedWindow, 10, 5 * kSec},
  };
  std::vector<LimiterStack> process;
  for (int p = 0; p < 2; ++p) {
    std::vector<std::shared_ptr<Limiter>> ls;
    for (std::size_t i = 0; i < declared.size(); ++i) {
      const auto& d = declared[i];
      ls.push_back(open(db, spec(d.algo, d.rate, std::chrono::microseconds(d.per_us), d.burst),
                        "k" + std::to_string(i)));
    }
    process.emplace_back(std::move(ls));
  }
  std::mt19937_64 random(42);
  struct Waiting {
    std::size_t process;
    Reservation r;
    std::int64_t late;
  };
  std::vector<Waiting> waiting;
  std::vector<std::int64_t> starts;
  std::int64_t now = kT0;
  auto run_until = [&](std::int64_t until) {
    for (bool again = true; again;) {
      again = false;
      auto due = std::min_element(waiting.begin(), waiting.end(), [](const Waiting& a, const Waiting& b) {
        return to_micros(a.r.at()) + a.late < to_micros(b.r.at()) + b.late;
      });
      if (due == waiting.end() || to_micros(due->r.at()) + due->late > until) return;
      now = std::max(now, to_micros(due->r.at()) + due->late);
      auto go = process[due->process].start(due->r, from_micros(now));
      ASSERT_TRUE(go) << go.error().to_string();
      if (*go) {
        starts.push_back(now);
        waiting.erase(due);
      } else {
        due->late = 0;
      }
      again = true;
    }
  };
  for (int i = 0; i < 120; ++i) {
    const std::int64_t next = now + static_cast<std::int64_t>(random() % 400'000);
    run_until(next);
    now = std::max(now, next);
    const std::size_t p = random() % 2;
    auto r = process[p].reserve(from_micros(now));
    ASSERT_TRUE(r) << r.error().to_string();
    switch (random() % 4) {
      case 0: ASSERT_TRUE(r->cancel()); break;
      case 1:
        waiting.push_back({p, std::move(*r), static_cast<std::int64_t>(random() % 1'500'000) + 1});
        break;
      default: waiting.push_back({p, std::move(*r), 0}); break;
    }
  }
  run_until(std::numeric_limits<std::int64_t>::max() / 2);
  ASSERT_TRUE(waiting.empty());
  std::sort(starts.begin(), starts.end());
  EXPECT_GT(starts.size(), 60u);
  for (const auto& d : declared) EXPECT_FALSE(testing::breach(d, starts)) << *testing::breach(d, starts);
}

// Holders who come a little late, as waking from a park always is: each
// start is counted when it really happens, so a server counting arrivals
// never sees more than the limit in any interval, and a late holder's
// successor waits a little in its place rather than going first.
TEST_P(DatabaseLimiterTest, Sliding_StartsAFewMillisecondsLate_NeverPutMoreThanTheLimitInAnyInterval) {
  testing::LimiterTables db(GetParam());
  const testing::DeclaredLimit declared{config::LimitAlgorithm::kSlidingWindow, 2, kSec};
  auto l = open(db, spec(declared.algo, declared.rate, std::chrono::microseconds(declared.per_us)));
  LimiterStack stack({l});
  std::vector<Reservation> held;
  for (int i = 0; i < 8; ++i) {
    auto r = stack.reserve(from_micros(kT0));
    ASSERT_TRUE(r) << r.error().to_string();
    held.push_back(std::move(*r));
  }
  std::vector<std::int64_t> starts;
  std::int64_t now = kT0;
  for (std::size_t i = 0; i < held.size(); ++i) {
    auto& r = held[i];
    // The holders of every other window wake 5 ms after their time.
    const std::int64_t late = (i / 2) % 2 == 0 ? 5'000 : 0;
    for (int tries = 0; tries < 10; ++tries) {
      now = std::max(now, to_micros(r.at()) + late);
      auto go = stack.start(r, from_micros(now));
      ASSERT_TRUE(go) << go.error().to_string();
      if (*go) break;
    }
    ASSERT_TRUE(r.started());
    starts.push_back(now);
  }
  EXPECT_FALSE(testing::breach(declared, starts)) << *testing::breach(declared, starts);
  // Late holders keep their places: 8 calls at 2 a second take 4 windows, not more.
  EXPECT_LT(starts.back(), kT0 + 3 * kSec + 100'000);
}

// A caller reads the clock, then waits for another process to let go of the
// database lock: its call goes when it gets the lock, so that is when it is
// counted, or the next process's call would reach the server too soon after it.
TEST_P(DatabaseLimiterTest, Sliding_StartAfterWaitingForTheLock_IsCountedWhenTheCallGoes) {
  testing::LimiterTables db(GetParam());
  auto clock = std::make_shared<FakeClock>(from_micros(kT0));
  DatabaseLimiterOptions options;
  options.clock = clock;
  auto l =
      DatabaseLimiter::open(spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s), "k", db.connect(), options);
  ASSERT_TRUE(l) << l.error().to_string();
  auto first = must((*l)->reserve(kT0, kT0));
  clock->advance(30ms);  // the wait for the lock
  auto go = (*l)->start(first, kT0);
  ASSERT_TRUE(go);
  EXPECT_EQ(*go, UseResult::kStarted);
  EXPECT_EQ(first.at_us, kT0 + 30'000);
  auto second = must((*l)->reserve(kT0 + 30'000, kT0));
  EXPECT_EQ(second.at_us, kT0 + 30'000 + kSec);
}

// Process A admitted a call at t0 and its request only leaves at +300 ms;
// B, on another connection, asks meanwhile. A's start recounted when it
// leaves moves every process's next slot, and counts once.
TEST_P(DatabaseLimiterTest, Sliding_StartRecountedWhenTheRequestLeaves_CountsThenForEveryConnection) {
  testing::LimiterTables db(GetParam());
  auto clock = std::make_shared<FakeClock>(from_micros(kT0));
  DatabaseLimiterOptions options;
  options.clock = clock;
  const auto s = spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s);
  auto a = DatabaseLimiter::open(s, "k", db.connect(), options);
  auto b = DatabaseLimiter::open(s, "k", db.connect(), options);
  ASSERT_TRUE(a && b);
  LimiterStack in_a({*a});
  LimiterStack in_b({*b});
  auto r = in_a.reserve(clock->now());
  ASSERT_TRUE(r);
  ASSERT_TRUE(*in_a.start(*r, clock->now()));
  EXPECT_EQ(*in_b.earliest(clock->now()), from_micros(kT0 + kSec));
  clock->advance(300ms);
  ASSERT_TRUE(*in_a.recount(*r, clock->now()));
  EXPECT_EQ(r->counted_at(), from_micros(kT0 + 300'000));
  EXPECT_EQ(*in_b.earliest(clock->now()), from_micros(kT0 + 1'300'000));
  clock->set(from_micros(kT0 + 1'300'000));
  EXPECT_TRUE(*in_b.try_acquire(clock->now()))
      << "A's start at t0 was given back, not kept beside the new one";
}

TEST_P(DatabaseLimiterTest, MakeLimiter_DatabaseScope_KeepsTheJitterMarginOfProcessScope) {
  testing::LimiterTables db(GetParam());
  auto l = make_limiter(spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s), "k", db.connect());
  ASSERT_TRUE(l) << l.error().to_string();
  auto first = must((*l)->reserve(kT0, kT0));
  auto second = must((*l)->reserve(kT0, kT0));
  EXPECT_EQ(first.at_us, kT0);
  // As in process scope: a start that reaches the server a little late must
  // still leave a whole window to the next one, and slots are granted with
  // half the margin again as slack over the starts checked.
  EXPECT_EQ(second.at_us, kT0 + kSec + kJitterFloorUs + kJitterFloorUs / 2);
}

// As in process scope (LimiterLag in limiter_property_test.cpp): steps that
// start late after their slots delay the slots granted after them by less
// and less until none. Were the delay passed on whole, every later step
// would wait as long, and park again, for as long as the backlog lasts.
TEST_P(DatabaseLimiterTest, MakeLimiter_DatabaseScope_AStallInABacklogHealsAsInProcessScope) {
  testing::LimiterTables db(GetParam());
  const auto sliding = spec(config::LimitAlgorithm::kSlidingWindow, 5, 1s);
  const auto bucket = spec(config::LimitAlgorithm::kTokenBucket, 10, 1s, 5);
  for (const auto& s : {sliding, bucket}) {
    const bool is_bucket = s.algorithm == config::LimitAlgorithm::kTokenBucket;
    const std::string name = is_bucket ? "bucket" : "sliding window";
    const std::int64_t late = is_bucket ? 600'000 : 120'000;
    constexpr int kSlots = 120;
    const auto delay =
        testing::delays_after_a_stall(s, limiter_key("stall", s), db.connect(), kSlots, 10, 8, late, kT0);
    ASSERT_EQ(delay.size(), static_cast<std::size_t>(kSlots)) << name;
    EXPECT_EQ(delay[10], late) << name;
    for (int i = 70; i < kSlots; ++i) {
      EXPECT_EQ(delay[static_cast<std::size_t>(i)], 0) << name << ": step " << i << " of " << kSlots;
    }
  }
}

// A keyed database-scope limit, as two processes hold it: each keeps one
// connection for all its keys, and a key's budget is one across both (and
// survives either dropping the key's limiter); other keys are untouched.
// Both name a secret key alike: the salt is one per database.
TEST_P(DatabaseLimiterTest, Keyed_TwoProcessesShareEachKeysBudgetAndNameKeysAlike) {
  testing::LimiterTables db(GetParam());
  const auto s = spec(config::LimitAlgorithm::kSlidingWindow, 1, 1s);
  auto keyed = [&] {
    auto tables = SharedLimiterTables::open(db.connect());
    EXPECT_TRUE(tables) << (tables ? "" : tables.error().to_string());
    return std::make_shared<KeyedLimiters>(
        [s, tables = *tables](const std::string& key, std::int64_t) {
          return make_database_limiter(s, "imdb/keyed#" + key, tables);
        },
        kSec);
  };
  auto one = keyed();
  auto two = keyed();
  auto start_in = [&](KeyedLimiters& k, const std::string& key, std::int64_t now) {
    auto l = k.get(key, now);
    EXPECT_TRUE(l);
    LimiterStack stack({*l});
    auto r = stack.reserve(from_micros(now));
    EXPECT_TRUE(r);
    const std::int64_t at = to_micros(r->at());
    if (at == now) {
      EXPECT_TRUE(stack.start(*r, from_micros(now)).value_or(false));
    }
    return at;  // a slot for later is given back
  };
  EXPECT_EQ(start_in(*one, "alice", kT0), kT0);
  EXPECT_GT(start_in(*two, "alice", kT0), kT0 + kSec - 1);  // the same budget
  EXPECT_EQ(start_in(*two, "bob", kT0), kT0);
  // Dropped from memory, the key's state is still in the store.
  EXPECT_EQ(one->sweep(kT0 + 10), 1u);
  EXPECT_GT(start_in(*one, "alice", kT0 + 10), kT0 + kSec);

  auto salt_one = key_salt(db.connect());
  auto salt_two = key_salt(db.connect());
  ASSERT_TRUE(salt_one && salt_two);
  EXPECT_EQ(*salt_one, *salt_two);
  EXPECT_EQ(salt_one->size(), 64u);
  EXPECT_EQ(key_identity("sk-secret", true, *salt_one), key_identity("sk-secret", true, *salt_two));
}

// A keyed limit over ever-new keys (one per user, per order) kept each
// key's rows in the store for ever: a key's decisions prune only its own
// rows, and a key never used again is never decided on. Rows of keys long
// idle now go, a batch at a time, at a decision on any key of the limit;
// a key whose rows still count keeps them.
TEST_P(DatabaseLimiterTest, Keyed_KeysLongIdleLeaveNoRowsInTheStore) {
  testing::LimiterTables db(GetParam());
  const auto& b = GetParam();
  auto rows = [&](const std::string& key_prefix) {
    std::int64_t n = 0;
    for (const char* table : {"limiter_state", "limiter_calls", "limiter_starts"}) {
      n += std::stoll(b.scalar(
          db.database(), "SELECT COUNT(*) FROM " + b.table(table) + " WHERE key LIKE '" + key_prefix + "%'"));
    }
    return n;
  };
  auto tables = SharedLimiterTables::open(db.connect());
  ASSERT_TRUE(tables) << tables.error().to_string();
  struct Limit {
    std::string name;
    config::LimitSpec spec;
  };
  const std::vector<Limit> limits{
      {"imdb/sliding", spec(config::LimitAlgorithm::kSlidingWindow, 2, 1s)},
      {"imdb/bucket", spec(config::LimitAlgorithm::kTokenBucket, 2, 1s, 2)},
      {"imdb/fixed", spec(config::LimitAlgorithm::kFixedWindow, 2, 1s)},
      // A key used once in an hour-long window still counts at the tidy.
      {"imdb/hourly", spec(config::LimitAlgorithm::kSlidingWindow, 1, 1h)},
  };
  std::vector<std::shared_ptr<KeyedLimiters>> keyed;
  for (const auto& l : limits)
    keyed.push_back(make_keyed_database_limiters(l.spec, l.name, *tables, nullptr, kSec));
  // Starts a call of `key` at `now` if one may start then; whether it did.
  auto call = [&](KeyedLimiters& k, const std::string& key, std::int64_t now) {
    auto l = k.get(key, now);
    EXPECT_TRUE(l) << (l ? "" : l.error().to_string());
    if (!l) return false;
    Slot slot = must((*l)->reserve(now, now));
    if (slot.at_us != now) {
      EXPECT_TRUE((*l)->cancel(slot));
      return false;
    }
    auto used = (*l)->start(slot, now);
    return used && *used == UseResult::kStarted;
  };
  constexpr int kUsers = 300;  // more than one tidy removes
  for (std::size_t i = 0; i < limits.size(); ++i) {
    for (int u = 0; u < kUsers; ++u) {
      ASSERT_TRUE(call(*keyed[i], "user-" + std::to_string(u), kT0 + u * 1000)) << limits[i].name;
    }
    EXPECT_GE(rows(limits[i].name + "#user-"), kUsers) << limits[i].name;
  }
  // Five minutes on: the users' rows are kept (nothing removed this soon).
  for (std::size_t i = 0; i < limits.size(); ++i) {
    EXPECT_TRUE(call(*keyed[i], "later", kT0 + 300 * kSec));
    EXPECT_GE(rows(limits[i].name + "#user-"), kUsers) << limits[i].name;
  }
  // Past ten minutes, the decisions of another key remove the idle keys'
  // rows, a batch each (a batch a second at most while more are left).
  for (std::size_t i = 0; i < limits.size(); ++i) {
    for (int s = 0; s < 3; ++s) (void)call(*keyed[i], "later", kT0 + (700 + s) * kSec);
  }
  EXPECT_EQ(rows("imdb/sliding#user-"), 0);
  EXPECT_EQ(rows("imdb/bucket#user-"), 0);
  EXPECT_EQ(rows("imdb/fixed#user-"), 0);
  // Keys still counting keep their rows: the hour's users, and the key in use.
  EXPECT_GE(rows("imdb/hourly#user-"), kUsers);
  EXPECT_FALSE(call(*keyed[3], "user-0", kT0 + 700 * kSec)) << "user-0's call in the hour was forgotten";
  EXPECT_GE(rows("imdb/sliding#later"), 1);
  // A key whose rows were removed has the budget of a key never seen.
  for (std::size_t i = 0; i < 3; ++i) {
    auto at_once = [&](const std::string& key) {
      int n = 0;
      while (n < 5 && call(*keyed[i], key, kT0 + 710 * kSec)) ++n;
      return n;
    };
    const int fresh = at_once("never-seen");
    EXPECT_GE(fresh, 1) << limits[i].name;
    EXPECT_EQ(at_once("user-1"), fresh) << limits[i].name;
  }
}

// A decision's commit does not wait for the server to flush its log to
// disk: the key stays locked until the commit returns, so a slow flush (a
// disk busy with other writes) slowed every process's decisions on it, and
// a call counted in a commit that returned late left well after its count.
// Counted as the log flushes the server made while one connection started
// 100 calls.
// (SQLite's limiter connection commits in WAL mode without one:
// synchronous=NORMAL.)
TEST(PostgresLimiter, Decisions_DoNotWaitForTheLogsFlushToDisk) {
  const auto all = store::testing::backends();
  const auto found = std::ranges::find(all, std::string("postgres"), &store::testing::Backend::name);
  ASSERT_NE(found, all.end());
  const store::testing::Backend& b = *found;
  testing::LimiterTables db(b);
  auto flushes = [&] { return std::stoll(b.scalar(db.database(), "SELECT wal_sync FROM pg_stat_wal")); };
  // A session's counts reach pg_stat_wal when it ends.
  auto sessions_left = [&] {
    return b.scalar(db.database(),
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid()");
  };
  const long long before = flushes();
  {
    auto l = open(db, spec(config::LimitAlgorithm::kSlidingWindow, 1000, 1s));
    ASSERT_NE(l, nullptr);
    for (int i = 0; i < 100; ++i) {
      const std::int64_t t = kT0 + i * 1000;
      Slot slot = must(l->reserve(t, t));
      ASSERT_EQ(slot.at_us, t);
      auto used = l->start(slot, t);
      ASSERT_TRUE(used && *used == UseResult::kStarted);
    }
  }
  for (int i = 0; i < 1000 && sessions_left() != "0"; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(sessions_left(), "0") << "the limiter's session did not end";
  const long long made = flushes() - before;
  std::printf("[flushes] 200 decisions: %lld flushes of the server's log\n", made);
  EXPECT_LT(made, 20) << "the decisions' commits waited for the log's flush";
}

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseLimiterTest, ::testing::ValuesIn(store::testing::backends()),
                         store::testing::backend_name);

}  // namespace
}  // namespace ratchet::limit
