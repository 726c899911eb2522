// Weighted calls: a limit's rate counts units, a call costs one or more, and
// a started call is corrected to its actual cost at once (Limiter::adjust).
// In-process limiters here; the database-scope ones in database_limiter_test.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "limit/adaptive_pacer.hpp"
#include "limit/fixed_window.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/start_journal.hpp"
#include "limit/token_bucket.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kSec = 1'000'000;
constexpr std::int64_t kT0 = 1'700'000'000 * kSec;  // a whole second since the epoch

Slot must(Result<Slot> r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r.value_or(Slot{});
}

std::int64_t must(Result<std::int64_t> r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r.value_or(-1);
}

// Reserves and starts a call of `units` at its slot's time; returns that time.
std::int64_t go(Limiter& l, std::int64_t now, std::int64_t units, Slot* out = nullptr) {
  Slot s = must(l.reserve(now, now, units));
  auto u = l.start(s, s.at_us);
  EXPECT_TRUE(u.has_value() && *u == UseResult::kStarted);
  if (out) *out = s;
  return s.at_us;
}

TEST(WeightedSlidingWindow, ACallOfThreeUnitsTakesThreeOfTheRate) {
  SlidingWindowLimiter l(10, kSec);
  EXPECT_EQ(go(l, kT0, 3), kT0);
  EXPECT_EQ(go(l, kT0, 3), kT0);
  EXPECT_EQ(go(l, kT0, 3), kT0);
  // 9 of 10 used: one unit fits, three do not until the first calls leave.
  EXPECT_EQ(must(l.earliest(kT0, kT0, 1)), kT0);
  EXPECT_EQ(must(l.earliest(kT0, kT0, 3)), kT0 + kSec);
  EXPECT_EQ(go(l, kT0 + 100 * kMs, 2), kT0 + kSec);
}

TEST(WeightedSlidingWindow, AnOverdraftMakesTheNextCallsWaitAndARefundFreesRoom) {
  SlidingWindowLimiter l(10, kSec);
  Slot first;
  go(l, kT0, 1, &first);
  ASSERT_TRUE(l.adjust(first, 10, kT0 + 5 * kMs).has_value());
  EXPECT_EQ(first.units, 10);
  EXPECT_EQ(must(l.earliest(kT0 + 5 * kMs, kT0 + 5 * kMs, 1)), kT0 + kSec);
  ASSERT_TRUE(l.adjust(first, 2, kT0 + 6 * kMs).has_value());
  EXPECT_EQ(must(l.earliest(kT0 + 6 * kMs, kT0 + 6 * kMs, 8)), kT0 + 6 * kMs);
  EXPECT_EQ(must(l.earliest(kT0 + 6 * kMs, kT0 + 6 * kMs, 9)), kT0 + kSec);
}

TEST(WeightedSlidingWindow, ACallDearerThanTheWholeRateWaitsForAnEmptyWindowAndOverdraws) {
  SlidingWindowLimiter l(5, kSec);
  go(l, kT0, 1);
  // 12 units never fit in 5: it waits for a window with nothing else in it.
  EXPECT_EQ(go(l, kT0 + 10 * kMs, 12), kT0 + kSec);
  EXPECT_EQ(must(l.earliest(kT0 + kSec, kT0 + kSec, 1)), kT0 + 2 * kSec);
}

TEST(WeightedSlidingWindow, CorrectingACallNotStartedIsACallerBug) {
  SlidingWindowLimiter l(5, kSec);
  Slot s = must(l.reserve(kT0, kT0, 2));
  auto st = l.adjust(s, 4, kT0);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code(), ErrorCode::kInvalidArgument);
}

TEST(WeightedSlidingWindow, ACancelledCallGivesBackAllItsUnits) {
  SlidingWindowLimiter l(4, kSec);
  Slot s = must(l.reserve(kT0, kT0, 4));
  EXPECT_EQ(must(l.earliest(kT0, kT0, 1)), kT0 + kSec);
  ASSERT_TRUE(l.cancel(s).has_value());
  EXPECT_EQ(must(l.earliest(kT0, kT0, 4)), kT0);
}

TEST(WeightedTokenBucket, UnitsComeOutOfTheBurstAndRefillAtTheRate) {
  TokenBucketLimiter l(10, kSec, 5);  // one unit per 100 ms, 5 at once
  EXPECT_EQ(go(l, kT0, 3), kT0);
  EXPECT_EQ(go(l, kT0, 2), kT0);
  // Empty: three units take 300 ms to come back.
  EXPECT_EQ(go(l, kT0, 3), kT0 + 300 * kMs);
}

TEST(WeightedTokenBucket, AnOverdraftIsPaidBackBeforeTheNextCall) {
  TokenBucketLimiter l(10, kSec, 5);
  Slot s;
  go(l, kT0, 1, &s);
  ASSERT_TRUE(l.adjust(s, 9, kT0 + kMs).has_value());  // 8 units over: 4 more than the bucket held
  EXPECT_EQ(must(l.earliest(kT0 + kMs, kT0 + kMs, 1)), kT0 + 500 * kMs);
  // Corrected down while it is the latest charge: exact.
  ASSERT_TRUE(l.adjust(s, 2, kT0 + 2 * kMs).has_value());
  EXPECT_EQ(must(l.earliest(kT0 + 2 * kMs, kT0 + 2 * kMs, 3)), kT0 + 2 * kMs);
  EXPECT_EQ(must(l.earliest(kT0 + 2 * kMs, kT0 + 2 * kMs, 4)), kT0 + 100 * kMs);
}

TEST(WeightedTokenBucket, ARefundBehindLaterChargesIsKept) {
  TokenBucketLimiter l(10, kSec, 5);
  Slot a;
  go(l, kT0, 3, &a);
  go(l, kT0, 2);
  ASSERT_TRUE(l.adjust(a, 1, kT0).has_value());
  // Not the latest charge: the two units are not given back (slower, never faster).
  EXPECT_EQ(must(l.earliest(kT0, kT0, 1)), kT0 + 100 * kMs);
}

TEST(WeightedFixedWindow, UnitsFillTheAlignedWindow) {
  FixedWindowLimiter l(10, kSec);
  EXPECT_EQ(go(l, kT0, 6), kT0);
  EXPECT_EQ(go(l, kT0 + 10 * kMs, 5), kT0 + kSec);
  Slot s;
  go(l, kT0 + kSec, 1, &s);
  ASSERT_TRUE(l.adjust(s, 5, kT0 + kSec).has_value());  // the window now holds 10
  EXPECT_EQ(must(l.earliest(kT0 + kSec, kT0 + kSec, 1)), kT0 + 2 * kSec);
  ASSERT_TRUE(l.adjust(s, 0, kT0 + kSec).has_value());  // and after a refund 5
  EXPECT_EQ(must(l.earliest(kT0 + kSec, kT0 + kSec, 5)), kT0 + kSec);
}

TEST(WeightedPacer, ACallOfUnitsIsSpacedByThatManyIntervals) {
  PacerOptions o;
  AdaptivePacer p(o);
  PaceHint h;
  h.interval = std::chrono::milliseconds(100);
  p.observe(h, from_micros(kT0));
  Slot s;
  EXPECT_EQ(go(p, kT0, 3, &s), kT0);
  EXPECT_GE(must(p.earliest(kT0, kT0, 1)), kT0 + 300 * kMs - kMs);
  ASSERT_TRUE(p.adjust(s, 5, kT0).has_value());
  EXPECT_GE(must(p.earliest(kT0, kT0, 1)), kT0 + 500 * kMs - kMs);
}

// A learned pace gives back what a call behind later ones did not use, as
// long as the pace has been busy since it started: a call admitted at an
// operation's mean cost that proves cheaper frees its room for the next.
TEST(WeightedPacer, ARefundBehindLaterStartsIsGivenBackWhileThePaceIsBusy) {
  AdaptivePacer p;
  PaceHint h;
  h.interval = std::chrono::milliseconds(100);
  p.observe(h, from_micros(kT0));
  const std::int64_t interval = to_micros(p.interval());  // 100 ms and a margin
  Slot a;
  EXPECT_EQ(go(p, kT0, 3, &a), kT0);
  const std::int64_t second = go(p, kT0 + 100 * kMs, 2);
  EXPECT_EQ(second, kT0 + 3 * interval);
  EXPECT_EQ(must(p.earliest(second, second, 1)), second + 2 * interval);  // busy for two more
  // a cost one unit, not three: the two it gave back come off the busy time.
  ASSERT_TRUE(p.adjust(a, 1, second).has_value());
  EXPECT_EQ(must(p.earliest(second, second, 1)), second);
}

TEST(WeightedPacer, ARefundFromBeforeAnIdleSpellIsKept) {
  AdaptivePacer p;
  PaceHint h;
  h.interval = std::chrono::milliseconds(100);
  p.observe(h, from_micros(kT0));
  Slot a;
  EXPECT_EQ(go(p, kT0, 3, &a), kT0);
  // Idle from about +300 ms to +1 s: the room a's refund would free went unused.
  EXPECT_EQ(go(p, kT0 + kSec, 2), kT0 + kSec);
  const std::int64_t busy_until = must(p.earliest(kT0 + kSec, kT0 + kSec, 1));
  EXPECT_GE(busy_until, kT0 + kSec + 200 * kMs);
  ASSERT_TRUE(p.adjust(a, 1, kT0 + kSec).has_value());
  EXPECT_EQ(must(p.earliest(kT0 + kSec, kT0 + kSec, 1)), busy_until);
}

// A reply that says its call cost more than its slot moves the pace on
// under the slots granted before it came: they were spaced for the least
// cost. Each may start up to one call's overdraft ahead of the moved pace
// (the bound a limit keeps with reported costs anyway), rather than each
// park again and push the next one further; the pace after them is kept.
TEST(WeightedPacer, SlotsGrantedBeforeAnOverdraftStillGoOnTime) {
  AdaptivePacer p;
  PaceHint h;
  h.interval = std::chrono::milliseconds(100);
  p.observe(h, from_micros(kT0));
  const std::int64_t interval = to_micros(p.interval());
  Slot a = must(p.reserve(kT0, kT0, 2));
  Slot b = must(p.reserve(kT0, kT0, 2));
  Slot c = must(p.reserve(kT0, kT0, 2));
  ASSERT_EQ(b.at_us, kT0 + 2 * interval);
  ASSERT_EQ(c.at_us, kT0 + 4 * interval);
  ASSERT_EQ(p.start(a, kT0).value_or(UseResult::kMoved), UseResult::kStarted);
  ASSERT_TRUE(p.adjust(a, 6, kT0 + 50 * kMs).has_value());  // 4 units over
  EXPECT_EQ(p.start(b, b.at_us).value_or(UseResult::kMoved), UseResult::kStarted);
  EXPECT_EQ(p.start(c, c.at_us).value_or(UseResult::kMoved), UseResult::kStarted);
  // Ten units spent by c's start: the next call waits for all of them.
  EXPECT_GE(must(p.earliest(c.at_us, c.at_us, 1)), kT0 + 10 * interval - interval);
}

// The leeway is one call's largest overdraft, not the sum of them: two
// calls that each overdrew by four units move a slot granted before them
// on by the second's four.
TEST(WeightedPacer, TheLeewayIsOneCallsOverdraftNotTheirSum) {
  AdaptivePacer p;
  PaceHint h;
  h.interval = std::chrono::milliseconds(100);
  p.observe(h, from_micros(kT0));
  const std::int64_t interval = to_micros(p.interval());
  Slot a = must(p.reserve(kT0, kT0, 2));
  Slot d = must(p.reserve(kT0, kT0, 2));
  Slot b = must(p.reserve(kT0, kT0, 2));
  ASSERT_EQ(p.start(a, a.at_us).value_or(UseResult::kMoved), UseResult::kStarted);
  ASSERT_EQ(p.start(d, d.at_us).value_or(UseResult::kMoved), UseResult::kStarted);
  ASSERT_TRUE(p.adjust(a, 6, d.at_us).has_value());
  ASSERT_TRUE(p.adjust(d, 6, d.at_us).has_value());
  // 12 units spent from kT0: b may go 5 intervals (one, and four over) before the pace's end.
  EXPECT_EQ(p.start(b, b.at_us).value_or(UseResult::kStarted), UseResult::kMoved);
  EXPECT_EQ(b.at_us, kT0 + 7 * interval);
}

TEST(WeightedJournal, AStartOfUnitsIsHandedOnWithItsUnits) {
  auto j = StartJournal::open("imdb", {.keep_us = kSec}, {}, kT0);
  ASSERT_TRUE(j.has_value());
  Slot s;
  go(**j, kT0, 3, &s);
  ASSERT_TRUE((*j)->adjust(s, 4, kT0 + kMs).has_value());
  std::int64_t units = 0;
  for (const Start& h : (*j)->history(kT0 + 2 * kMs)) {
    EXPECT_EQ(h.at_us, kT0) << "an overdraft counts at the call's start";
    units += h.units;
  }
  EXPECT_EQ(units, 4);
  // A limiter built from that history (a reload) counts the four units.
  SlidingWindowLimiter after(5, kSec);
  auto h = (*j)->history(kT0 + 2 * kMs);
  after.count_started(h);
  EXPECT_EQ(must(after.earliest(kT0 + 2 * kMs, kT0 + 2 * kMs, 2)), kT0 + kSec);
}

TEST(WeightedStack, EveryLimiterOfTheStackIsCorrected) {
  auto a = std::make_shared<SlidingWindowLimiter>(10, kSec);
  auto b = std::make_shared<FixedWindowLimiter>(20, kSec);
  LimiterStack stack({a, b});
  auto r = stack.reserve(from_micros(kT0), 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->units(), 4);
  auto started = stack.start(*r, from_micros(kT0));
  ASSERT_TRUE(started.has_value() && *started);
  ASSERT_TRUE(stack.adjust(*r, 10, from_micros(kT0 + kMs)).has_value());
  EXPECT_EQ(r->units(), 10);
  EXPECT_EQ(must(a->earliest(kT0 + kMs, kT0 + kMs, 1)), kT0 + kSec);
  EXPECT_EQ(must(b->earliest(kT0 + kMs, kT0 + kMs, 11)), kT0 + kSec);
  EXPECT_EQ(must(b->earliest(kT0 + kMs, kT0 + kMs, 10)), kT0 + kMs);
}

// ------------------------------------------------------------ properties

using Algo = config::LimitAlgorithm;

struct Declared {
  Algo algo;
  std::int64_t rate;
  std::int64_t per_us;
  std::int64_t burst;
  std::int64_t holds() const { return algo == Algo::kTokenBucket ? burst : rate; }
};

std::shared_ptr<Limiter> make(const Declared& l) {
  switch (l.algo) {
    case Algo::kSlidingWindow: return std::make_shared<SlidingWindowLimiter>(l.rate, l.per_us);
    case Algo::kTokenBucket: return std::make_shared<TokenBucketLimiter>(l.rate, l.per_us, l.burst);
    case Algo::kFixedWindow: return std::make_shared<FixedWindowLimiter>(l.rate, l.per_us);
  }
  return nullptr;
}

struct Spent {
  std::int64_t at;
  std::int64_t units;
};

// The most units `l` allows in any of its windows, plus `slack`, checked
// independently of the limiter code: a message naming the first breach.
std::optional<std::string> breach(const Declared& l, std::vector<Spent> spent, std::int64_t slack) {
  std::sort(spent.begin(), spent.end(), [](const Spent& a, const Spent& b) { return a.at < b.at; });
  const auto n = spent.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t sum = 0;
    for (std::size_t j = i; j < n; ++j) {
      const std::int64_t span = spent[j].at - spent[i].at;
      sum += spent[j].units;
      std::int64_t allowed = 0;
      switch (l.algo) {
        case Algo::kSlidingWindow:
          if (span >= l.per_us) j = n;  // past this window
          allowed = l.rate;
          break;
        case Algo::kFixedWindow:
          if (floor_div(spent[j].at, l.per_us) != floor_div(spent[i].at, l.per_us)) j = n;
          allowed = l.rate;
          break;
        case Algo::kTokenBucket:
          // The bucket's envelope: its size plus what refills over the span.
          allowed = l.burst + span * l.rate / l.per_us;
          break;
      }
      if (j < n && sum > allowed + slack) {
        return std::to_string(sum) + " units from " + std::to_string(spent[i].at - kT0) + " to " +
               std::to_string(spent[j].at - kT0) + " us, allowed " + std::to_string(allowed) + " + " +
               std::to_string(slack);
      }
    }
  }
  return std::nullopt;
}

rc::Gen<Declared> gen_declared() {
  return rc::gen::apply(
      [](int algo, int rate, int per_ms, int burst) {
        return Declared{static_cast<Algo>(algo), rate, per_ms * kMs, std::min(burst, rate)};
      },
      rc::gen::inRange(0, 3), rc::gen::inRange(2, 20), rc::gen::element(100, 250, 1000),
      rc::gen::inRange(2, 20));
}

// Random limits, random costs, late starts and cancellations, and each call
// corrected to a random actual cost right after it starts (more, fewer or
// none): no window ever holds more units than its limit plus the largest
// single overdraft.
RC_GTEST_PROP(WeightedProperty, NoWindowHoldsMoreUnitsThanItsLimitPlusOneCallsLargestOverdraft, ()) {
  const auto limits = *rc::gen::container<std::vector<Declared>>(*rc::gen::inRange(1, 3), gen_declared());
  std::vector<std::shared_ptr<Limiter>> limiters;
  std::int64_t smallest = INT64_MAX;
  for (const auto& l : limits) {
    limiters.push_back(make(l));
    smallest = std::min(smallest, l.holds());
  }
  LimiterStack stack(limiters);
  struct Pending {
    Reservation r;
    std::int64_t lateness;
    std::int64_t actual;
  };
  std::vector<Pending> pending;
  std::vector<Spent> spent;
  std::int64_t overdraft = 0;
  std::int64_t now = kT0;
  auto run_due = [&](std::int64_t until) {
    for (bool progressed = true; progressed;) {
      progressed = false;
      std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
        return to_micros(a.r.at()) + a.lateness < to_micros(b.r.at()) + b.lateness;
      });
      for (auto it = pending.begin(); it != pending.end(); ++it) {
        const std::int64_t when = to_micros(it->r.at()) + it->lateness;
        if (when > until) break;
        now = std::max(now, when);
        auto started = stack.start(it->r, from_micros(now));
        RC_ASSERT(started.has_value());
        if (*started) {
          overdraft = std::max(overdraft, it->actual - it->r.units());
          RC_ASSERT(stack.adjust(it->r, it->actual, from_micros(now)).has_value());
          spent.push_back({to_micros(it->r.counted_at()), it->actual});
          pending.erase(it);
        } else {
          it->lateness = 0;
        }
        progressed = true;
        break;
      }
    }
  };
  const int arrivals = *rc::gen::inRange(1, 80);
  for (int i = 0; i < arrivals; ++i) {
    const std::int64_t next = now + *rc::gen::inRange<std::int64_t>(0, 200 * kMs);
    run_due(next);
    now = std::max(now, next);
    const std::int64_t cost = *rc::gen::inRange<std::int64_t>(1, smallest + 1);
    auto r = stack.reserve(from_micros(now), cost);
    RC_ASSERT(r.has_value());
    const int act = *rc::gen::inRange(0, 5);
    if (act == 0) {
      RC_ASSERT(r->cancel().has_value());
      continue;
    }
    const std::int64_t late = act == 1 ? *rc::gen::inRange<std::int64_t>(1, 800 * kMs) : 0;
    const std::vector<std::int64_t> actuals = {cost, cost, 0, 1, cost + 1, 2 * cost};
    const std::int64_t actual = *rc::gen::elementOf(actuals);
    pending.push_back({std::move(*r), late, actual});
  }
  run_due(std::numeric_limits<std::int64_t>::max() / 2);
  RC_ASSERT(pending.empty());
  for (const auto& l : limits) {
    if (auto b = breach(l, spent, overdraft)) {
      RC_FAIL("algorithm " + std::to_string(static_cast<int>(l.algo)) + " " + std::to_string(l.rate) + "/" +
              std::to_string(l.per_us) + "us burst " + std::to_string(l.burst) + ": " + *b);
    }
  }
}

// When demand exceeds the limit, calls of mixed costs use above 95 % of the
// units it allows (a dear call waiting for room does not strand the rest).
RC_GTEST_PROP(WeightedProperty, MixedCostsUseAbove95PercentOfTheUnitsWhenDemandExceedsTheLimit, ()) {
  const Algo algo = *rc::gen::element(Algo::kSlidingWindow, Algo::kTokenBucket, Algo::kFixedWindow);
  const std::int64_t rate = *rc::gen::inRange(10, 40);
  const std::int64_t per = *rc::gen::element(100, 1000) * kMs;
  const std::int64_t max_cost = *rc::gen::inRange<std::int64_t>(1, 6);
  Declared d{algo, rate, per, rate};
  auto limiter = make(d);
  LimiterStack stack({limiter});
  const int windows = 40;
  const std::int64_t horizon = per * windows;
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  std::uniform_int_distribution<std::int64_t> cost(1, max_cost);
  // A backlog far above the limit, arriving in bursts; time only moves on:
  // before each burst, the calls whose slots have come start, in time order.
  // A list, so the calls are sorted and moved without moving a reservation
  // (moving one onto another cancels the other); only the call that failed to
  // start moves, re-filed earlier among equals as a stable sort would.
  std::list<Reservation> pending;
  std::int64_t used = 0;
  auto by_time = [](const Reservation& x, const Reservation& y) { return x.at() < y.at(); };
  auto start_due = [&](std::int64_t until) {
    pending.sort(by_time);
    while (!pending.empty() && to_micros(pending.front().at()) < until) {
      auto started = stack.start(pending.front(), pending.front().at());
      RC_ASSERT(started.has_value());
      if (*started) {
        used += pending.front().units();
        pending.pop_front();
      } else {
        auto to = std::next(pending.begin());
        while (to != pending.end() && by_time(*to, pending.front())) ++to;
        pending.splice(to, pending, pending.begin());
      }
    }
  };
  for (std::int64_t t = kT0; t < kT0 + horizon; t += per / 4) {
    start_due(t);
    for (int k = 0; k < rate; ++k) {
      auto r = stack.reserve(from_micros(t), cost(random));
      RC_ASSERT(r.has_value());
      pending.push_back(std::move(*r));
    }
  }
  start_due(kT0 + horizon);
  // A bucket may also spend its burst at the start.
  const double allowed = static_cast<double>(rate * windows + (algo == Algo::kTokenBucket ? rate : 0));
  RC_TAG(algo == Algo::kSlidingWindow ? "sliding" : algo == Algo::kTokenBucket ? "bucket" : "fixed");
  RC_LOG() << "algorithm " << static_cast<int>(algo) << ", used " << used << " of " << allowed << "\n";
  RC_ASSERT(static_cast<double>(used) >= 0.95 * allowed);
  RC_ASSERT(static_cast<double>(used) <= allowed);
}

}  // namespace
}  // namespace ratchet::limit
