// Turns between keys on a budget they share: a key with a long queue does
// not make a key with a short one wait behind it, weights divide the slots,
// a key idle for a while banks no turns, and no slot is granted further
// ahead than the horizon.
#include "retry/turn_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "forwarding_limiter.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"
#include "paced_run.hpp"

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;

// A budget of one call per 100 ms (a token bucket of 10/s without burst).
std::shared_ptr<limit::Limiter> paced() {
  config::LimitSpec spec;
  spec.algorithm = config::LimitAlgorithm::kTokenBucket;
  spec.rate = 10;
  spec.per = 1s;
  spec.burst = 1;
  auto l = limit::make_limiter(spec, "portal/shared");
  EXPECT_TRUE(l) << (l ? "" : l.error().to_string());
  return *l;
}

// A sliding window of `rate` calls (units) a second.
std::shared_ptr<limit::Limiter> sliding(std::int64_t rate, const std::string& key) {
  config::LimitSpec spec;
  spec.algorithm = config::LimitAlgorithm::kSlidingWindow;
  spec.rate = rate;
  spec.per = 1s;
  auto l = limit::make_limiter(spec, key);
  EXPECT_TRUE(l) << (l ? "" : l.error().to_string());
  return l ? *l : nullptr;
}

// Steps of several keys asking for turns; every grant is written down.
struct Bed {
  FakeClock clock;
  std::shared_ptr<limit::Limiter> shared = paced();
  TurnQueue queue{50ms};
  struct Step {
    std::string key;
    std::shared_ptr<Turn> turn;
    int woken = 0;
    std::optional<limit::Reservation> slot;
  };
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<std::string> order;  // keys, in the order their slots were taken

  std::map<std::string, std::shared_ptr<limit::Limiter>> own;  // a key's own limit, if it has one

  Step& ask(const std::string& key, double weight = 1) {
    steps.push_back(std::make_unique<Step>());
    Step& s = *steps.back();
    s.key = key;
    take(s, weight);
    return s;
  }
  std::vector<std::shared_ptr<limit::Limiter>> limiters_of(const std::string& key) {
    if (auto it = own.find(key); it != own.end()) return {shared, it->second};
    return {shared};
  }
  void take(Step& s, double weight = 1) {
    auto limiters = limiters_of(s.key);
    const std::size_t own_count = limiters.size() - 1;
    auto got = queue.ask(s.turn,
                         TurnQueue::Ask{s.key, weight, limiters, 1, own_count, 1,
                                        [&s](TimePoint) { ++s.woken; }, nullptr, 0, nullptr},
                         clock.now());
    ASSERT_TRUE(got) << got.error().to_string();
    if (*got) {
      EXPECT_LE(got->value().at() - clock.now(), 50ms) << "a slot granted beyond the horizon";
      s.slot = std::move(**got);
      order.push_back(s.key);
      // The call starts at its slot.
      if (s.slot->at() > clock.now()) clock.set(s.slot->at());
      limit::LimiterStack stack(limiters_of(s.key));
      auto started = stack.start(*s.slot, clock.now());
      ASSERT_TRUE(started && *started);
    }
  }
  // Runs the keeper's part until nobody waits: at each next grant, grants,
  // and every step woken asks again (as a resumed step does).
  void drain() {
    for (int guard = 0; guard < 10'000 && queue.waiting() > 0; ++guard) {
      auto next = queue.next_grant();
      ASSERT_TRUE(next.has_value()) << "steps wait and no grant is due";
      if (*next > clock.now()) clock.set(*next);
      queue.grant(clock.now());
      for (auto& s : steps) {
        if (s->woken > 0 && !s->slot) take(*s);
      }
    }
    EXPECT_EQ(queue.waiting(), 0u);
  }
};

// A limiter that writes down what the queue says is waiting before each
// slot it reserves, and otherwise is the limiter it wraps.
class WaitingRecorder final : public ratchet::testing::ForwardingLimiter {
 public:
  using ForwardingLimiter::ForwardingLimiter;
  std::vector<std::int64_t> told;  // waiting() before each reserve

  void waiting(std::int64_t calls, std::int64_t now_us) override {
    last_ = calls;
    last_at_ = now_us;
  }

 protected:
  Result<limit::Slot> reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) override {
    told.push_back(last_at_ == now_us ? last_ : -1);
    return ForwardingLimiter::reserve_units(now_us, t_us, units);
  }

 private:
  std::int64_t last_ = -1;
  std::int64_t last_at_ = -1;
};

TEST(TurnQueue, ALimitSharedByTheTurnsHearsHowManyCallsWaitBeforeEachSlot) {
  // The learned pace holds a window's last units back to probe its end
  // only while more calls wait than the window holds: it must be told.
  Bed bed;
  auto recorder = std::make_shared<WaitingRecorder>(paced());
  bed.shared = recorder;
  for (int i = 0; i < 5; ++i) bed.ask("alice");
  bed.ask("bob");
  bed.drain();
  // Every slot was reserved just after the count (a stack reserves again
  // when its limiter answers later than asked: the same count holds).
  ASSERT_FALSE(recorder->told.empty());
  for (const std::int64_t n : recorder->told) EXPECT_GE(n, 1) << "a slot reserved with no count";
  std::vector<std::int64_t> counts = recorder->told;
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  // The first asked alone; the others waited together, fewer at each grant.
  EXPECT_EQ(counts, (std::vector<std::int64_t>{1, 5, 4, 3, 2, 1}));
}

TEST(TurnQueue, TheCallsTheEngineStillHoldsAddToTheCountTheLimitHears) {
  // Three calls wait here; the engine holds ten more jobs behind them
  // (set_backlog): the pace must not take the three for a run's end.
  Bed bed;
  auto recorder = std::make_shared<WaitingRecorder>(paced());
  bed.shared = recorder;
  std::atomic<std::int64_t> backlog{10};
  bed.queue.set_backlog([&backlog] { return backlog.load(); });
  for (int i = 0; i < 3; ++i) bed.ask("alice");
  bed.drain();
  ASSERT_FALSE(recorder->told.empty());
  std::vector<std::int64_t> counts = recorder->told;
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  EXPECT_EQ(counts, (std::vector<std::int64_t>{11, 12, 11})) << "the first asked alone, then two waited";
  backlog = 0;
  recorder->told.clear();
  bed.ask("alice");
  bed.drain();
  ASSERT_FALSE(recorder->told.empty());
  for (const std::int64_t n : recorder->told) EXPECT_EQ(n, 1) << "with none held, only the call itself";
}

TEST(TurnQueue, ALimitSharedByTheTurnsHearsHowManyCallsWaitBeforeItSaysWhenTheNextMayGo) {
  // The learned pace holds a window's last unit back, to probe where the
  // window ends, only while more calls wait than the window has left. A
  // run's last call (a retry after a 5xx, say) that asks alone while one
  // unit is left must have it at once, not at the window's end: the queue
  // asks when the head may go, so the count must come before that too.
  constexpr std::int64_t kSecond = 1'000'000;
  limit::FixedWindowServer server{2 * kSecond, 0, 18, 10'000};
  server.ietf = true;
  auto pacer = std::make_shared<limit::AdaptivePacer>(limit::plugin_pacing(Duration::zero()));
  std::int64_t now = 1'700'000'000 * kSecond + 300'000;
  // Seventeen calls of the server's eighteen, answered: one unit is left
  // of a window that ends 1.7 s from now, at a place not yet known exactly.
  for (const int calls : {1, 16}) {
    std::vector<std::int64_t> started;
    for (int i = 0; i < calls; ++i) {
      pacer->waiting(calls - i + 1, now);
      auto slot = pacer->reserve(now, now);
      ASSERT_TRUE(slot && slot->at_us == now) << "call " << i << " of " << calls;
      ASSERT_TRUE(pacer->start(*slot, now));
      started.push_back(now);
    }
    now += server.latency_us;
    for (const std::int64_t s : started) {
      pacer->observe(server.answer(now), limit::from_micros(now), limit::from_micros(s));
    }
  }
  Bed bed;
  bed.shared = pacer;
  bed.clock.set(limit::from_micros(now));
  auto& last = bed.ask("alice");
  ASSERT_TRUE(last.slot.has_value()) << "the last call was not granted when it asked";
  EXPECT_EQ(last.slot->at(), limit::from_micros(now)) << "the last unit was held for a probe";
}

TEST(TurnQueue, AKeyWithAFewCallsIsNotQueuedBehindAKeyWithMany) {
  Bed bed;
  for (int i = 0; i < 30; ++i) bed.ask("alice");
  for (int i = 0; i < 3; ++i) bed.ask("bob");
  bed.drain();
  ASSERT_EQ(bed.order.size(), 33u);
  // Bob's three calls alternate with alice's from the first grant after he asked.
  std::vector<std::size_t> bob_at;
  for (std::size_t i = 0; i < bed.order.size(); ++i) {
    if (bed.order[i] == "bob") bob_at.push_back(i);
  }
  ASSERT_EQ(bob_at.size(), 3u);
  EXPECT_LE(bob_at.back(), 6u) << "bob's last call came " << bob_at.back() << " grants in";
  for (const auto& s : bed.steps) EXPECT_LE(s->woken, 1) << "a step woken more than once";
}

TEST(TurnQueue, WeightsDivideTheSlotsWhileBothKeysWait) {
  Bed bed;
  for (int i = 0; i < 40; ++i) bed.ask("gold", 3);
  for (int i = 0; i < 40; ++i) bed.ask("free", 1);
  bed.drain();
  // Of the first 40 slots, gold (weight 3) gets three to free's one.
  int gold = 0;
  for (std::size_t i = 0; i < 40; ++i) gold += bed.order[i] == "gold" ? 1 : 0;
  EXPECT_GE(gold, 29);
  EXPECT_LE(gold, 31);
  // Once gold is done, free has the budget to itself.
  EXPECT_EQ(bed.order.back(), "free");
}

TEST(TurnQueue, AKeyIdleForAWhileBanksNoTurns) {
  Bed bed;
  for (int i = 0; i < 20; ++i) bed.ask("alice");
  bed.ask("carol");  // one call, early
  // Alice's queue is worked for a while before carol asks again.
  for (int round = 0; round < 10; ++round) {
    auto next = bed.queue.next_grant();
    ASSERT_TRUE(next);
    if (*next > bed.clock.now()) bed.clock.set(*next);
    bed.queue.grant(bed.clock.now());
    for (auto& s : bed.steps) {
      if (s->woken > 0 && !s->slot) bed.take(*s);
    }
  }
  const std::size_t before = bed.order.size();
  for (int i = 0; i < 6; ++i) bed.ask("carol");
  bed.drain();
  // Carol's six calls take turns with alice's rest: no run of her calls
  // makes up for the time she was idle.
  int run = 0;
  int longest = 0;
  for (std::size_t i = before; i < bed.order.size(); ++i) {
    run = bed.order[i] == "carol" ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_LE(longest, 2);
}

TEST(TurnQueue, AKeyWaitingForItsOwnLimitTakesNoTurnUntilItAllowsACall) {
  Bed bed;
  // Alice's own limit: one call a second; bob has none of his own.
  config::LimitSpec one;
  one.algorithm = config::LimitAlgorithm::kTokenBucket;
  one.rate = 1;
  one.per = 1s;
  one.burst = 1;
  bed.own["alice"] = *limit::make_limiter(one, "portal/alice");
  const TimePoint t0 = bed.clock.now();
  for (int i = 0; i < 3; ++i) bed.ask("alice");
  for (int i = 0; i < 15; ++i) bed.ask("bob");
  bed.drain();
  ASSERT_EQ(bed.order.size(), 18u);
  // The shared budget (10 a second) goes to bob while alice waits for her
  // own: his fifteen are done in about 1.5 s, and alice's three take 2 s.
  EXPECT_LT(bed.clock.now() - t0, 2500ms);
  int bob_before_alices_second = 0;
  for (const auto& k : bed.order) {
    if (k == "alice" && bob_before_alices_second > 0) break;
    bob_before_alices_second += k == "bob" ? 1 : 0;
  }
  EXPECT_GE(bob_before_alices_second, 8);
  for (const auto& st : bed.steps) EXPECT_LE(st->woken, 1);
}

TEST(TurnQueue, AStepThatGaveUpIsSkippedAndItsTurnGoesToTheNext) {
  Bed bed;
  for (int i = 0; i < 4; ++i) bed.ask("alice");
  bed.steps[2]->turn.reset();  // that step gave up (cancelled, failed elsewhere)
  bed.drain();
  EXPECT_EQ(bed.order.size(), 3u);
  EXPECT_EQ(bed.steps[2]->woken, 0);
}

// A step asks again for another number of units (a new estimate) while it
// is the only one its key has queued: its key is filed anew, once, and the
// grants go on (a key filed twice was granted turns it did not have, and
// once empty, turned the grant loop for ever).
TEST(TurnQueue, TheOnlyStepOfAKeyAskingAgainForOtherUnits_IsGrantedOnceAndTheGrantsGoOn) {
  Bed bed;
  bed.ask("alice");  // goes at once
  Bed::Step& again = bed.ask("alice");
  ASSERT_FALSE(again.slot.has_value());
  for (int i = 0; i < 3; ++i) bed.ask("bob");
  int woken = 0;
  auto got = bed.queue.ask(
      again.turn,
      TurnQueue::Ask{
          "alice", 1, {bed.shared}, 1, 0, 2, [&woken](TimePoint) { ++woken; }, nullptr, 0, nullptr},
      bed.clock.now());
  ASSERT_TRUE(got) << got.error().to_string();
  ASSERT_FALSE(got->has_value());
  for (int guard = 0; guard < 100 && woken == 0; ++guard) {
    auto next = bed.queue.next_grant();
    ASSERT_TRUE(next.has_value());
    if (*next > bed.clock.now()) bed.clock.set(*next);
    bed.queue.grant(bed.clock.now());
    for (auto& st : bed.steps) {
      if (st.get() != &again && st->woken > 0 && !st->slot) bed.take(*st);
    }
  }
  EXPECT_EQ(woken, 1);
  // Alice's two units took her turn; bob's three are granted after it.
  bed.drain();
  int bobs = 0;
  for (const auto& k : bed.order) bobs += k == "bob" ? 1 : 0;
  EXPECT_EQ(bobs, 3);
  EXPECT_EQ(bed.queue.waiting(), 0u);
}

TEST(TurnQueue, NextGrantIsWhenTheHeadsSlotComesWithinTheHorizon) {
  Bed bed;
  bed.ask("alice");  // goes at once
  Bed::Step& second = bed.ask("alice");
  ASSERT_FALSE(second.slot.has_value());  // its slot is 100 ms ahead: beyond the horizon
  auto next = bed.queue.next_grant();
  ASSERT_TRUE(next);
  const std::int64_t now_us = limit::to_micros(bed.clock.now());
  auto slot_us = bed.shared->earliest(now_us, now_us);
  ASSERT_TRUE(slot_us);
  EXPECT_GE(*slot_us - now_us, 100'000);
  EXPECT_EQ(*next, limit::from_micros(*slot_us) - 50ms);
  // Granted then, not earlier.
  bed.clock.set(*next - 1ms);
  EXPECT_EQ(bed.queue.grant(bed.clock.now()), 0u);
  bed.clock.set(*next);
  EXPECT_EQ(bed.queue.grant(bed.clock.now()), 1u);
  EXPECT_EQ(second.woken, 1);
  EXPECT_FALSE(bed.queue.next_grant().has_value());  // nobody waits
}

// Costs in flight: calls admitted at their operation's least cost (1 unit)
// but expected to cost 3 are granted only while the limit has room for
// what those granted before them may still add. Ten steps asking at once
// into a budget of 10 units a second get three slots, not ten; and once
// each reply has corrected its call to 3 units, the next grants wait for
// room, so no second ever holds more than 10 units.
TEST(TurnQueue, CostsInFlight_AGrantLeavesRoomForWhatTheCallsBeforeItMayAdd) {
  FakeClock clock;
  std::shared_ptr<limit::Limiter> shared = sliding(10, "portal/weighted");
  ASSERT_TRUE(shared);
  TurnQueue queue{50ms};
  auto in_flight = std::make_shared<UnitsInFlight>();
  struct Step {
    std::shared_ptr<Turn> turn;
    UnitsInFlight::Hold hold;
    std::optional<limit::Reservation> slot;
    bool woken = false;
    bool replied = false;
  };
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<std::pair<TimePoint, std::int64_t>> spent;  // (start, units) of every call
  auto take = [&](Step& s) {
    auto got = queue.ask(
        s.turn,
        TurnQueue::Ask{"", 1, {shared}, 1, 0, 1, [&s](TimePoint) { s.woken = true; }, in_flight, 2, &s.hold},
        clock.now());
    ASSERT_TRUE(got) << got.error().to_string();
    if (!*got) return;
    s.slot = std::move(**got);
  };
  for (int i = 0; i < 10; ++i) {
    steps.push_back(std::make_unique<Step>());
    take(*steps.back());
  }
  int granted = 0;
  for (auto& s : steps) granted += s->slot ? 1 : 0;
  EXPECT_EQ(granted, 3) << "granted before any reply";
  EXPECT_EQ(in_flight->units(), 6);
  // Every 10 ms: the calls whose slots came start; each replies 10 ms later
  // with its cost of 3 units, and its hold goes (as CallGate::record does).
  limit::LimiterStack stack({shared});
  for (int tick = 0; tick < 500; ++tick) {
    clock.advance(10ms);
    queue.grant(clock.now());
    for (auto& s : steps) {
      if (s->woken && !s->slot) take(*s);
      if (!s->slot || s->replied) continue;
      if (!s->slot->started()) {
        if (s->slot->at() > clock.now()) continue;
        auto started = stack.start(*s->slot, clock.now());
        ASSERT_TRUE(started && *started);
        continue;
      }
      ASSERT_TRUE(stack.adjust(*s->slot, 3, clock.now()));
      s->hold.release();
      s->replied = true;
      spent.emplace_back(s->slot->counted_at(), 3);
    }
  }
  ASSERT_EQ(spent.size(), 10u) << "every step was granted in the end";
  EXPECT_EQ(in_flight->units(), 0);
  for (const auto& [from, units] : spent) {
    std::int64_t in_second = 0;
    for (const auto& [at, u] : spent) in_second += at >= from && at < from + 1s ? u : 0;
    EXPECT_LE(in_second, 10) << "units spent in the second from a start";
  }
}

// Shared turns (limit/turn_shares.hpp): a process that finds itself alone
// in them grants without asking the database again for kAloneUs, so a
// plugin whose calls seldom wait pays a transaction each 50 ms, not one a
// call; while another process takes part, every grant asks.
TEST(TurnQueue, SharedTurns_AProcessAloneAsksTheDatabaseOnceIn50ms) {
  struct CountingShares final : limit::TurnShares {
    bool alone = true;
    int takes = 0;
    Result<Taken> take(double, std::int64_t, bool, bool) override {
      ++takes;
      return Taken{true, alone};
    }
    Status join(double, std::int64_t) override { return {}; }
    Status leave(std::int64_t) override { return {}; }
  };
  for (const bool alone : {true, false}) {
    FakeClock clock;
    std::shared_ptr<limit::Limiter> shared = sliding(10'000, "portal/roomy");
    ASSERT_TRUE(shared);
    auto shares = std::make_shared<CountingShares>();
    shares->alone = alone;
    TurnQueue queue{50ms};
    queue.share_with(shares);
    // 100 calls 1 ms apart, each granted as it asks.
    for (int i = 0; i < 100; ++i) {
      std::shared_ptr<Turn> turn;
      auto got = queue.ask(
          turn,
          TurnQueue::Ask{"k" + std::to_string(i % 3), 1, {shared}, 1, 0, 1, nullptr, nullptr, 0, nullptr},
          clock.now());
      ASSERT_TRUE(got && *got);
      clock.advance(1ms);
    }
    if (alone) {
      EXPECT_LE(shares->takes, 3) << "asked the database about every call while alone";
    } else {
      EXPECT_EQ(shares->takes, 100);
    }
  }
}

}  // namespace
}  // namespace ratchet::retry
