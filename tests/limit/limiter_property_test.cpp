// Property tests: for random limit sets and random arrival patterns (with
// late starts and cancellations), the starts the limiters let through never
// exceed any declared limit, and when demand exceeds the limit the limiters
// use at least 95 % of what it allows.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "limit/fixed_window.hpp"
#include "limit/gcra_math.hpp"
#include "limit/keyed_limiters.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"
#include "limit_checks.hpp"
#include "stall_replay.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // a whole second since the epoch

using testing::breach;
using Algo = config::LimitAlgorithm;
using Limit = testing::DeclaredLimit;

std::shared_ptr<Limiter> make(const Limit& l) {
  switch (l.algo) {
    case Algo::kSlidingWindow: return std::make_shared<SlidingWindowLimiter>(l.rate, l.per_us);
    case Algo::kTokenBucket: return std::make_shared<TokenBucketLimiter>(l.rate, l.per_us, l.burst);
    case Algo::kFixedWindow: return std::make_shared<FixedWindowLimiter>(l.rate, l.per_us);
  }
  return nullptr;
}

rc::Gen<Limit> gen_limit() {
  return rc::gen::apply(
      [](int algo, int rate, int per_ms, int burst) {
        return Limit{static_cast<Algo>(algo), rate, per_ms * kMs, std::min(burst, rate)};
      },
      rc::gen::inRange(0, 3), rc::gen::inRange(1, 8), rc::gen::element(100, 250, 1000, 3000),
      rc::gen::inRange(1, 8));
}

// What a caller does after reserving.
enum class Act { kOnTime, kLate, kCancel };

RC_GTEST_PROP(LimiterProperty, NoIntervalEverHoldsMoreStartsThanAnyLimitAllows, ()) {
  const auto limits = *rc::gen::container<std::vector<Limit>>(*rc::gen::inRange(1, 4), gen_limit());
  std::vector<std::shared_ptr<Limiter>> limiters;
  for (const auto& l : limits) limiters.push_back(make(l));
  LimiterStack stack(limiters);

  struct Pending {
    Reservation r;
    Act act;
    std::int64_t lateness;
  };
  std::vector<Pending> pending;
  std::vector<std::int64_t> starts;
  std::int64_t now = kT0;
  const int arrivals = *rc::gen::inRange(1, 120);
  // Runs every pending caller whose (late) time has come, in time order.
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
        auto go = stack.start(it->r, from_micros(now));
        RC_ASSERT(go.has_value());
        if (*go) {
          starts.push_back(now);
          pending.erase(it);
        } else {
          it->lateness = 0;  // moved: come back on time
        }
        progressed = true;
        break;
      }
    }
  };
  for (int i = 0; i < arrivals; ++i) {
    const std::int64_t next = now + *rc::gen::inRange<std::int64_t>(0, 400 * kMs);
    run_due(next);
    now = std::max(now, next);
    auto r = stack.reserve(from_micros(now));
    RC_ASSERT(r.has_value());
    const Act act = *rc::gen::element(Act::kOnTime, Act::kOnTime, Act::kLate, Act::kCancel);
    if (act == Act::kCancel) {
      RC_ASSERT(r->cancel().has_value());
      continue;
    }
    const std::int64_t late = act == Act::kLate ? *rc::gen::inRange<std::int64_t>(1, 1500 * kMs) : 0;
    pending.push_back({std::move(*r), act, late});
  }
  run_due(std::numeric_limits<std::int64_t>::max() / 2);
  RC_ASSERT(pending.empty());
  std::sort(starts.begin(), starts.end());
  for (const auto& l : limits) {
    auto b = breach(l, starts);
    RC_ASSERT_FALSE(b.has_value());
  }
}

// At the server: the engine's limiters (as make_limiter builds them for a
// declared limit, with their jitter margin and burst guard) under a backlog,
// each call reaching the server up to 50ms after it started (opening a
// connection, a loaded machine). The arrivals, not the starts, must keep the
// declared limit exactly: a user who declares the server's own limit gets no
// 429. Fixed windows are counted in the server's aligned windows.
RC_GTEST_PROP(LimiterProperty, ArrivalsLaggingStartsByUpTo50msKeepTheDeclaredLimitAtTheServer, ()) {
  config::LimitSpec spec;
  spec.algorithm = *rc::gen::element(Algo::kSlidingWindow, Algo::kTokenBucket, Algo::kFixedWindow);
  spec.rate = *rc::gen::inRange(1, 30);
  spec.per = std::chrono::microseconds(*rc::gen::element(1000, 2000, 10000, 60000) * kMs);
  // A bucket that allows no burst at all (strict spacing) would refuse any
  // two calls that arrive closer than its interval, which no margin short
  // of the lag itself on every interval can prevent: buckets of 2 or more.
  if (spec.algorithm == Algo::kTokenBucket) spec.burst = *rc::gen::inRange<std::int64_t>(2, spec.rate + 2);
  auto limiter = make_limiter(spec, "p");
  RC_ASSERT(limiter.has_value());
  LimiterStack stack({*limiter});
  // A backlog of calls over about five windows; each caller comes back at
  // its slot's time, or (one in three) up to half a window late, a worker
  // having been busy, and starts when the limiter lets it.
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  std::uniform_int_distribution<std::int64_t> lag(0, 50 * kMs);
  const std::int64_t per = spec.per.count();
  std::uniform_int_distribution<std::int64_t> lateness(0, per / 2);
  std::uniform_int_distribution<int> one_in_three(0, 2);
  const std::int64_t calls = spec.rate * 5 + 3;
  const std::int64_t start_at = kT0 + *rc::gen::inRange<std::int64_t>(0, per);  // any alignment
  std::vector<std::int64_t> arrivals;
  std::string trace = "burst " + std::to_string(spec.burst.value_or(0)) + ": ";
  std::int64_t now = start_at;
  for (std::int64_t i = 0; i < calls; ++i) {
    auto r = stack.reserve(from_micros(now));
    RC_ASSERT(r.has_value());
    if (one_in_three(random) == 0) now = std::max(now, to_micros(r->at())) + lateness(random);
    for (;;) {
      now = std::max(now, to_micros(r->at()));
      auto go = stack.start(*r, from_micros(now));
      RC_ASSERT(go.has_value());
      if (*go) break;
    }
    arrivals.push_back(now + lag(random));
    trace += std::to_string(now - kT0) + "->" + std::to_string(arrivals.back() - kT0) + " ";
  }
  std::sort(arrivals.begin(), arrivals.end());
  const Limit declared{spec.algorithm, spec.rate, per, spec.burst.value_or(1)};
  auto b = breach(declared, arrivals);
  RC_TAG(spec.algorithm == Algo::kSlidingWindow ? "sliding"
         : spec.algorithm == Algo::kTokenBucket ? "bucket"
                                                : "fixed");
  if (b) RC_FAIL(*b + "; starts->arrivals (us from the test epoch): " + trace);
}

// The same with every slot reserved at once, a backlog held by steps that
// come back for their slots in time order, some late (a worker was busy),
// and start when the limiter lets them: starts the slots' slack lets go out
// of order still reach the server within the declared limit.
RC_GTEST_PROP(LimiterProperty, ABacklogStartedLateAndOutOfOrderKeepsTheDeclaredLimitAtTheServer, ()) {
  config::LimitSpec spec;
  spec.algorithm = *rc::gen::element(Algo::kSlidingWindow, Algo::kTokenBucket, Algo::kFixedWindow);
  spec.rate = *rc::gen::inRange(1, 30);
  spec.per = std::chrono::microseconds(*rc::gen::element(1000, 2000, 10000, 60000) * kMs);
  if (spec.algorithm == Algo::kTokenBucket) spec.burst = *rc::gen::inRange<std::int64_t>(2, spec.rate + 2);
  auto limiter = make_limiter(spec, "p");
  RC_ASSERT(limiter.has_value());
  LimiterStack stack({*limiter});
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  std::uniform_int_distribution<std::int64_t> lag(0, 50 * kMs);
  const std::int64_t per = spec.per.count();
  std::uniform_int_distribution<std::int64_t> lateness(0, per / 2);
  std::uniform_int_distribution<int> one_in_three(0, 2);
  const std::int64_t calls = spec.rate * 5 + 3;
  const std::int64_t start_at = kT0 + *rc::gen::inRange<std::int64_t>(0, per);  // any alignment
  std::vector<Reservation> held;
  std::multimap<std::int64_t, std::size_t> comes;
  for (std::int64_t i = 0; i < calls; ++i) {
    auto r = stack.reserve(from_micros(start_at));
    RC_ASSERT(r.has_value());
    const std::int64_t at = to_micros(r->at()) + (one_in_three(random) == 0 ? lateness(random) : 0);
    comes.emplace(at, held.size());
    held.push_back(std::move(*r));
  }
  std::vector<std::int64_t> arrivals;
  std::string trace = "burst " + std::to_string(spec.burst.value_or(0)) + ": ";
  while (!comes.empty()) {
    auto [now, i] = *comes.begin();
    comes.erase(comes.begin());
    auto go = stack.start(held[i], from_micros(now));
    RC_ASSERT(go.has_value());
    if (!*go) {
      comes.emplace(std::max(now + 1, to_micros(held[i].at())), i);
      continue;
    }
    arrivals.push_back(now + lag(random));
    trace += std::to_string(now - kT0) + "->" + std::to_string(arrivals.back() - kT0) + " ";
  }
  std::sort(arrivals.begin(), arrivals.end());
  const Limit declared{spec.algorithm, spec.rate, per, spec.burst.value_or(1)};
  auto b = breach(declared, arrivals);
  RC_TAG(spec.algorithm == Algo::kSlidingWindow ? "sliding"
         : spec.algorithm == Algo::kTokenBucket ? "bucket"
                                                : "fixed");
  if (b) RC_FAIL(*b + "; starts->arrivals (us from the test epoch): " + trace);
}

// The worst lag for a small bucket whose burst the guard takes all but one
// of (26 a second, burst 2): calls starting strictly spaced, every third
// reaching the server at once and the two before it 50 ms late, put three
// arrivals within one interval unless three starts span an interval plus
// the lag.
TEST(LimiterLag, SmallBucketBacklog_ThreeStartsSpanAnIntervalPlusTheLag) {
  for (std::int64_t burst : {2, 3}) {
    config::LimitSpec spec;
    spec.algorithm = Algo::kTokenBucket;
    spec.rate = 26;
    spec.per = std::chrono::seconds(1);
    spec.burst = burst;
    auto limiter = make_limiter(spec, "p");
    ASSERT_TRUE(limiter.has_value());
    LimiterStack stack({*limiter});
    std::vector<std::int64_t> starts;
    std::int64_t now = kT0;
    for (int i = 0; i < 60; ++i) {
      auto r = stack.reserve(from_micros(now));
      ASSERT_TRUE(r.has_value());
      now = std::max(now, to_micros(r->at()));
      auto go = stack.start(*r, from_micros(now));
      ASSERT_TRUE(go.has_value() && *go);
      starts.push_back(now);
    }
    const std::int64_t interval = 1'000'000 / 26 + 1;
    for (std::size_t i = 0; i + static_cast<std::size_t>(burst) < starts.size(); ++i) {
      EXPECT_GE(starts[i + static_cast<std::size_t>(burst)] - starts[i], interval + 50 * kMs)
          << "burst " << burst << ": starts " << i << " and " << i + static_cast<std::size_t>(burst);
    }
  }
}

// Steps that start late, after their slots (their process stalled), delay
// the slots granted after them by less and less until none: slots are
// granted with slack over what the starts are checked against. Were the
// delay passed on whole, every later step would wait as long (120 ms in the
// window, 230 ms in the bucket), and park again when that passes the park
// threshold, for as long as the backlog lasts.
TEST(LimiterLag, AStallInABacklog_LaterStepsStartOnTimeAgainSoon) {
  config::LimitSpec sliding;
  sliding.rate = 5;
  sliding.per = std::chrono::seconds(1);
  config::LimitSpec bucket;
  bucket.algorithm = Algo::kTokenBucket;
  bucket.rate = 10;
  bucket.per = std::chrono::seconds(1);
  bucket.burst = 5;
  for (const auto& spec : {sliding, bucket}) {
    const bool is_bucket = spec.algorithm == Algo::kTokenBucket;
    const std::string name = is_bucket ? "bucket" : "sliding window";
    // A bucket absorbs lateness up to its tolerance (370 ms) as it is.
    const std::int64_t late = is_bucket ? 600 * kMs : 120 * kMs;
    constexpr int kSlots = 120;
    const auto delay = testing::delays_after_a_stall(spec, "p", {}, kSlots, 10, 8, late);
    ASSERT_EQ(delay.size(), static_cast<std::size_t>(kSlots)) << name;
    EXPECT_EQ(delay[10], late) << name;
    for (int i = 70; i < kSlots; ++i) {
      EXPECT_EQ(delay[static_cast<std::size_t>(i)], 0) << name << ": step " << i << " of " << kSlots;
    }
  }
}

// Demand above the limit: a backlog from the start and arrivals at twice the
// allowed rate; starts within the horizon reach 95 % of what the limits allow.
RC_GTEST_PROP(LimiterProperty, UtilisationStaysAbove95PercentWhenDemandExceedsTheLimit, ()) {
  const Algo algo = *rc::gen::element(Algo::kSlidingWindow, Algo::kTokenBucket, Algo::kFixedWindow);
  const std::int64_t rate = *rc::gen::inRange(1, 12);
  const std::int64_t per = *rc::gen::element(100, 1000, 60000) * kMs;
  const int windows = *rc::gen::inRange(20, 30);
  // Sometimes a second, longer limit stacked on the first (as 10/s plus N/minute).
  const bool stacked = *rc::gen::arbitrary<bool>();
  const std::int64_t long_mult = *rc::gen::inRange(2, 5);
  const std::int64_t long_rate = *rc::gen::inRange(rate, rate * long_mult + 1);
  std::vector<Limit> limits = {{algo, rate, per, 1}};
  if (stacked) limits.push_back({Algo::kSlidingWindow, long_rate, per * long_mult, 1});
  std::vector<std::shared_ptr<Limiter>> limiters;
  for (const auto& l : limits) limiters.push_back(make(l));
  LimiterStack stack(limiters);

  const std::int64_t horizon = per * windows * (stacked ? long_mult : 1);
  double allowed = 1e18;
  for (const auto& l : limits) {
    allowed = std::min(allowed, static_cast<double>(l.rate) * static_cast<double>(horizon / l.per_us));
  }
  // Arrivals: a backlog of one window's worth at the start, then twice the rate.
  std::vector<std::int64_t> arrivals(static_cast<std::size_t>(rate), kT0);
  const std::int64_t mean_gap = std::max<std::int64_t>(per / (2 * rate), 1);
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  std::uniform_int_distribution<std::int64_t> gap(0, 2 * mean_gap);
  for (std::int64_t t = kT0; t < kT0 + horizon;) {
    t += gap(random);
    arrivals.push_back(t);
  }
  std::int64_t started = 0;
  std::vector<Reservation> held;
  for (auto a : arrivals) {
    auto r = stack.reserve(from_micros(a));
    RC_ASSERT(r.has_value());
    if (to_micros(r->at()) < kT0 + horizon) {
      auto go = stack.start(*r, r->at());
      RC_ASSERT(go.has_value() && *go);
      ++started;
    } else {
      held.push_back(std::move(*r));
    }
  }
  RC_TAG(algo == Algo::kSlidingWindow ? "sliding" : algo == Algo::kTokenBucket ? "bucket" : "fixed");
  RC_ASSERT(static_cast<double>(started) >= 0.95 * allowed);
}

// Keyed limits: random keys, each arrival of one key, through its key's
// limiter and one unkeyed limit stacked on it, with late starts,
// cancellations and a sweep before every decision (a key dropped too early
// would forget calls that still count). No key's window ever holds more than
// the keyed limit allows, nor the calls of all keys more than the unkeyed one.
RC_GTEST_PROP(LimiterProperty, NoKeysWindowEverHoldsMoreThanItsLimitWhateverKeysAreDropped, ()) {
  const Limit per_key = *gen_limit();
  const Limit global = *gen_limit();
  const int key_count = *rc::gen::inRange(1, 7);
  KeyedLimiters keyed(
      [&](const std::string&, std::int64_t) -> Result<std::shared_ptr<Limiter>> { return make(per_key); }, 1);
  auto shared = make(global);

  struct Pending {
    Reservation r;
    int key;
    std::int64_t lateness;
  };
  std::vector<Pending> pending;
  std::map<int, std::vector<std::int64_t>> starts_of;
  std::vector<std::int64_t> all_starts;
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
        keyed.sweep(now);
        LimiterStack stack(it->r.limiters());
        auto go = stack.start(it->r, from_micros(now));
        RC_ASSERT(go.has_value());
        if (*go) {
          starts_of[it->key].push_back(now);
          all_starts.push_back(now);
          pending.erase(it);
        } else {
          it->lateness = 0;
        }
        progressed = true;
        break;
      }
    }
  };
  const int arrivals = *rc::gen::inRange(1, 150);
  for (int i = 0; i < arrivals; ++i) {
    const std::int64_t next = now + *rc::gen::inRange<std::int64_t>(0, 300 * kMs);
    run_due(next);
    now = std::max(now, next);
    const int key = *rc::gen::inRange(0, key_count);
    auto limiter = keyed.get("k" + std::to_string(key), now);
    RC_ASSERT(limiter.has_value());
    LimiterStack stack({*limiter, shared});
    limiter->reset();
    auto r = stack.reserve(from_micros(now));
    RC_ASSERT(r.has_value());
    const Act act = *rc::gen::element(Act::kOnTime, Act::kOnTime, Act::kLate, Act::kCancel);
    if (act == Act::kCancel) {
      RC_ASSERT(r->cancel().has_value());
      continue;
    }
    const std::int64_t late = act == Act::kLate ? *rc::gen::inRange<std::int64_t>(1, 1500 * kMs) : 0;
    pending.push_back({std::move(*r), key, late});
  }
  run_due(std::numeric_limits<std::int64_t>::max() / 2);
  RC_ASSERT(pending.empty());
  for (auto& [key, starts] : starts_of) {
    std::sort(starts.begin(), starts.end());
    auto b = breach(per_key, starts);
    RC_ASSERT_FALSE(b.has_value());
  }
  std::sort(all_starts.begin(), all_starts.end());
  RC_ASSERT_FALSE(breach(global, all_starts).has_value());
}

// Demand above each key's limit, from several keys at once: every key gets
// at least 95 % of what its own limit allows over the horizon (one key's
// backlog takes nothing from another's budget).
RC_GTEST_PROP(LimiterProperty, EveryKeyUsesAbove95PercentOfItsLimitWhenItsDemandExceedsIt, ()) {
  const Algo algo = *rc::gen::element(Algo::kSlidingWindow, Algo::kTokenBucket, Algo::kFixedWindow);
  const std::int64_t rate = *rc::gen::inRange(1, 12);
  const std::int64_t per = *rc::gen::element(100, 1000, 60000) * kMs;
  const int windows = *rc::gen::inRange(20, 30);
  const int key_count = *rc::gen::inRange(2, 8);
  const Limit l{algo, rate, per, 1};
  KeyedLimiters keyed(
      [&](const std::string&, std::int64_t) -> Result<std::shared_ptr<Limiter>> { return make(l); }, per);
  const std::int64_t horizon = per * windows;
  const double allowed = static_cast<double>(rate) * windows;
  std::mt19937_64 random(*rc::gen::arbitrary<std::uint64_t>());
  // Key 0 floods (ten times its rate); the others ask twice their rate.
  struct Arrival {
    std::int64_t at;
    int key;
  };
  std::vector<Arrival> arrivals;
  for (int k = 0; k < key_count; ++k) {
    const std::int64_t mean_gap = std::max<std::int64_t>(per / ((k == 0 ? 10 : 2) * rate), 1);
    std::uniform_int_distribution<std::int64_t> gap(0, 2 * mean_gap);
    for (std::int64_t i = 0; i < rate; ++i) arrivals.push_back({kT0, k});
    for (std::int64_t t = kT0; t < kT0 + horizon;) {
      t += gap(random);
      arrivals.push_back({t, k});
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  std::vector<std::int64_t> started(static_cast<std::size_t>(key_count), 0);
  std::vector<Reservation> held;
  for (const auto& a : arrivals) {
    auto limiter = keyed.get("k" + std::to_string(a.key), a.at);
    RC_ASSERT(limiter.has_value());
    LimiterStack stack({*limiter});
    auto r = stack.reserve(from_micros(a.at));
    RC_ASSERT(r.has_value());
    if (to_micros(r->at()) < kT0 + horizon) {
      auto go = stack.start(*r, r->at());
      RC_ASSERT(go.has_value() && *go);
      ++started[static_cast<std::size_t>(a.key)];
    } else {
      held.push_back(std::move(*r));
    }
  }
  for (auto n : started) RC_ASSERT(static_cast<double>(n) >= 0.95 * allowed);
}

}  // namespace
}  // namespace ratchet::limit
