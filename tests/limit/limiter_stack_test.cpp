#include "limit/limiter_stack.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "limit/fixed_window.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"

namespace ratchet::limit {
namespace {

using namespace std::chrono_literals;

Reservation must(Result<Reservation> r) {
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().to_string());
  return r ? std::move(*r) : Reservation();
}

TEST(LimiterStack_Reserve, ProceedsOnlyWhenEveryLimitAllows) {
  FakeClock clock;
  auto per_second = std::make_shared<SlidingWindowLimiter>(10, to_micros(1s));
  auto per_minute = std::make_shared<SlidingWindowLimiter>(15, to_micros(60s));
  LimiterStack stack({per_second, per_minute});
  std::vector<Reservation> held;
  std::vector<TimePoint> starts;
  for (int i = 0; i < 16; ++i) {
    held.push_back(must(stack.reserve(clock.now())));
    starts.push_back(held.back().at());
  }
  // 10 now, 5 more a second later, then the minute limit holds the 16th.
  EXPECT_EQ(starts[9], clock.now());
  EXPECT_EQ(starts[10], clock.now() + 1s);
  EXPECT_EQ(starts[14], clock.now() + 1s);
  EXPECT_EQ(starts[15], clock.now() + 60s);
}

TEST(LimiterStack_Reserve, ReservesTheAgreedTimeInEveryLimiter) {
  FakeClock clock;
  auto a = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto b = std::make_shared<SlidingWindowLimiter>(1, to_micros(5s));
  LimiterStack both({a, b});
  auto r1 = must(both.reserve(clock.now()));
  auto r2 = must(both.reserve(clock.now()));
  EXPECT_EQ(r2.at(), clock.now() + 5s);
  // `a` alone now has slots at 0 and 5s held; 1s is still free in it.
  LimiterStack only_a({a});
  EXPECT_EQ(must(only_a.reserve(clock.now())).at(), clock.now() + 1s);
}

TEST(LimiterStack_Cancel, DestroyingAReservationGivesEverySlotBack) {
  FakeClock clock;
  auto a = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto b = std::make_shared<TokenBucketLimiter>(1, to_micros(1s), 1);
  LimiterStack stack({a, b});
  { auto r = must(stack.reserve(clock.now())); }
  EXPECT_EQ(must(stack.reserve(clock.now())).at(), clock.now());
}

TEST(LimiterStack_Start, WaitsUntilTheReservedTimeThenGoes) {
  FakeClock clock;
  LimiterStack stack({std::make_shared<SlidingWindowLimiter>(1, to_micros(1s))});
  ASSERT_TRUE(*stack.try_acquire(clock.now()));
  auto r = must(stack.reserve(clock.now()));
  EXPECT_FALSE(*stack.start(r, clock.now()));
  EXPECT_TRUE(r.held());
  clock.advance(1s);
  EXPECT_TRUE(*stack.start(r, clock.now()));
  EXPECT_TRUE(r.started());
  EXPECT_FALSE(r.held());
}

TEST(LimiterStack_Start, AHolderAfterALateStartWaitsForEveryLimiterInPlace) {
  FakeClock clock;
  auto window = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto bucket = std::make_shared<TokenBucketLimiter>(4, to_micros(1s), 1);
  LimiterStack stack({window, bucket});
  const TimePoint t0 = clock.now();
  auto first = must(stack.reserve(clock.now()));
  auto second = must(stack.reserve(clock.now()));  // at +1s
  clock.advance(500ms);
  EXPECT_TRUE(*stack.start(first, clock.now()));  // late, but the room was there
  clock.advance(500ms);
  // The window holds `second` until `first` leaves it, half a second on.
  EXPECT_FALSE(*stack.start(second, clock.now()));
  EXPECT_TRUE(second.held());
  EXPECT_EQ(second.at(), t0 + 1500ms);
  clock.advance(500ms);
  EXPECT_TRUE(*stack.start(second, clock.now()));
}

// Two calls come late to two fixed windows that each hold one call: the
// first limiter moves each call to its next window with room, and the other
// window is full there. The calls must still go, each once both windows have
// room at one time; held in different windows, each call's stale slot moved
// it past the other's, window after window, and neither ever started.
TEST(LimiterStack_Start, CallsMovedByOneLimiterPastAnothersFullWindowStillStart) {
  FakeClock clock;
  const TimePoint t0 = clock.now();
  const std::int64_t per = to_micros(250ms);
  auto a = std::make_shared<FixedWindowLimiter>(1, per);
  auto b = std::make_shared<FixedWindowLimiter>(1, per);
  LimiterStack stack({a, b});
  auto p = must(stack.reserve(clock.now()));  // window 0
  auto q = must(stack.reserve(clock.now()));  // window 1
  ASSERT_EQ(q.at(), t0 + 250ms);
  // Calls of other stacks, one under each limiter: window 5 in a, 6 in b.
  const std::int64_t w0 = to_micros(t0);
  Slot in_a = a->reserve(w0, w0 + 5 * per).value();
  Slot in_b = b->reserve(w0, w0 + 6 * per).value();
  ASSERT_EQ(in_a.at_us, w0 + 5 * per);
  ASSERT_EQ(in_b.at_us, w0 + 6 * per);
  clock.advance(5 * 250ms);  // both calls come in window 5, late
  EXPECT_FALSE(*stack.start(p, clock.now()));
  EXPECT_FALSE(*stack.start(q, clock.now()));
  ASSERT_TRUE(a->cancel(in_a).has_value());
  ASSERT_TRUE(b->cancel(in_b).has_value());
  // Each holder comes back at its reservation's time until its call goes.
  std::vector<TimePoint> went;
  for (int turn = 0; turn < 40 && went.size() < 2; ++turn) {
    Reservation& next = (p.held() && (!q.held() || p.at() <= q.at())) ? p : q;
    clock.set(std::max(clock.now(), next.at()));
    auto go = stack.start(next, clock.now());
    ASSERT_TRUE(go.has_value());
    if (*go) went.push_back(clock.now());
  }
  ASSERT_EQ(went.size(), 2u) << "a call was moved on 40 times and never started";
  // Neither waits past the first windows where both limiters had room.
  EXPECT_LE(went[1], t0 + 9 * 250ms);
}

// A call admitted at t0 whose request only leaves at t0 + 300 ms: counted
// at t0, the next call would reach the server 700 ms after it, inside a
// 1/1s window. Recounted when it leaves, the next one waits a full second.
TEST(LimiterStack_Recount, ALateRequestIsCountedWhenItLeaves) {
  FakeClock clock;
  const TimePoint t0 = clock.now();
  auto window = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto bucket = std::make_shared<TokenBucketLimiter>(1, to_micros(1s), 1);
  LimiterStack stack({window, bucket});
  auto r = must(stack.reserve(clock.now()));
  ASSERT_TRUE(*stack.start(r, clock.now()));
  EXPECT_EQ(r.counted_at(), t0);
  clock.advance(300ms);
  ASSERT_TRUE(*stack.recount(r, clock.now()));
  EXPECT_TRUE(r.started());
  EXPECT_EQ(r.counted_at(), t0 + 300ms);
  EXPECT_EQ(*stack.earliest(clock.now()), t0 + 1300ms);
  // Still one call counted in each: a second call at +1.3 s fits both.
  clock.advance(1s);
  EXPECT_TRUE(*stack.try_acquire(clock.now()));
}

// A recounted call keeps its place: B, queued behind it, does not take the
// window from it; B waits the few milliseconds A left late, in its place.
TEST(LimiterStack_Recount, KeepsItsPlaceAheadOfTheSlotsGrantedAfterIt) {
  FakeClock clock;
  const TimePoint t0 = clock.now();
  auto window = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto bucket = std::make_shared<TokenBucketLimiter>(1, to_micros(1s), 1);
  LimiterStack stack({window, bucket});
  auto a = must(stack.reserve(clock.now()));
  ASSERT_TRUE(*stack.start(a, clock.now()));
  auto b = must(stack.reserve(clock.now()));
  EXPECT_EQ(b.at(), t0 + 1s);
  clock.advance(10ms);
  ASSERT_TRUE(*stack.recount(a, clock.now()));
  EXPECT_EQ(a.counted_at(), t0 + 10ms);
  clock.set(b.at());
  EXPECT_FALSE(*stack.start(b, clock.now()));
  EXPECT_EQ(b.at(), t0 + 1010ms);
  clock.set(b.at());
  EXPECT_TRUE(*stack.start(b, clock.now()));
}

// A counted at t0 but still not sent at t0 + 1050 ms, while B (+100 ms) and
// C (+1 s, once A's count left the window) went: sent now, A would make
// three within a second at the server. Recounted, it waits for B to leave.
TEST(LimiterStack_Recount, NoRoomLeftWhenItLeaves_HoldsALaterSlotToStartThen) {
  FakeClock clock;
  const TimePoint t0 = clock.now();
  LimiterStack stack({std::make_shared<SlidingWindowLimiter>(2, to_micros(1s))});
  auto a = must(stack.reserve(clock.now()));
  ASSERT_TRUE(*stack.start(a, clock.now()));
  clock.advance(100ms);
  ASSERT_TRUE(*stack.try_acquire(clock.now()));
  auto c = must(stack.reserve(clock.now()));
  EXPECT_EQ(c.at(), t0 + 1s);
  clock.set(t0 + 1s);
  ASSERT_TRUE(*stack.start(c, clock.now()));
  clock.set(t0 + 1050ms);
  EXPECT_FALSE(*stack.recount(a, clock.now()));
  EXPECT_TRUE(a.held());
  EXPECT_EQ(a.at(), t0 + 1100ms);
  clock.set(a.at());
  ASSERT_TRUE(*stack.start(a, clock.now()));
  EXPECT_EQ(a.counted_at(), t0 + 1100ms);
}

// One call an hour (`hourly`), and one each 100 ms shared with another
// operation (C). A is counted at t0; B holds the next hour's slot. A's
// request leaves 150 ms late, 30 ms after C went: the short window has room
// for A again at t0 + 220 ms. A waits those 70 ms in its place; it does not
// queue behind B for two hours, which would leave the hour's one call unmade.
void recounted_late_keeps_its_place_in(const std::shared_ptr<Limiter>& hourly) {
  const TimePoint t0 = FakeClock().now();
  auto spacing = std::make_shared<SlidingWindowLimiter>(1, to_micros(100ms));
  LimiterStack stack({hourly, spacing});
  auto a = must(stack.reserve(t0));
  ASSERT_TRUE(*stack.start(a, t0));
  auto b = must(stack.reserve(t0));
  EXPECT_EQ(b.at(), t0 + 1h);
  ASSERT_TRUE(*LimiterStack({spacing}).try_acquire(t0 + 120ms));
  EXPECT_FALSE(*stack.recount(a, t0 + 150ms));
  EXPECT_TRUE(a.held());
  EXPECT_EQ(a.at(), t0 + 220ms) << "A lost its place: " << std::chrono::duration<double>(a.at() - t0).count()
                                << " s after t0";
  ASSERT_TRUE(*stack.start(a, a.at()));
  EXPECT_EQ(a.counted_at(), t0 + 220ms);
  EXPECT_EQ(b.at(), t0 + 1h);
  EXPECT_TRUE(*stack.start(b, t0 + 1h + 220ms));
}

TEST(LimiterStack_Recount, MovedAFewMillisecondsLater_KeepsItsPlaceAheadOfLaterSlots) {
  recounted_late_keeps_its_place_in(std::make_shared<SlidingWindowLimiter>(1, to_micros(1h)));
}

// One call a second shared by every account, one each 100 ms for each. Of
// three calls granted at once, the second (B) starts on time; its request
// leaves 150 ms late, 30 ms after another call of its account went. The
// account's window moves B 70 ms; the shared window keeps B's place too,
// rather than put it behind the call granted after it.
TEST(LimiterStack_Recount, MovedByOneLimiter_KeepsItsPlaceInTheOthers) {
  const TimePoint t0 = FakeClock().now();
  auto shared = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  auto account = std::make_shared<SlidingWindowLimiter>(1, to_micros(100ms));
  LimiterStack stack({shared, account});
  std::vector<Reservation> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(must(stack.reserve(t0)));
  ASSERT_TRUE(*stack.start(calls[0], t0));
  Reservation& b = calls[1];
  const TimePoint tb = b.at();
  EXPECT_EQ(tb, t0 + 1s);
  EXPECT_EQ(calls[2].at(), t0 + 2s);
  ASSERT_TRUE(*stack.start(b, tb));
  ASSERT_TRUE(*LimiterStack({account}).try_acquire(tb + 120ms));
  EXPECT_FALSE(*stack.recount(b, tb + 150ms));
  EXPECT_EQ(b.at(), tb + 220ms) << "B lost its place: " << std::chrono::duration<double>(b.at() - tb).count()
                                << " s late";
  ASSERT_TRUE(*stack.start(b, b.at()));
  EXPECT_EQ(b.counted_at(), tb + 220ms);
  EXPECT_EQ(calls[2].at(), t0 + 2s);
}

// The first case with a token bucket of one call an hour: the bucket keeps
// the call's charge where it was granted.
TEST(LimiterStack_Recount, MovedByAnotherLimiter_KeepsItsChargeInATokenBucket) {
  recounted_late_keeps_its_place_in(std::make_shared<TokenBucketLimiter>(1, to_micros(1h), 1));
}

TEST(LimiterStack_TryAcquire, RefusesWithoutHoldingAnything) {
  FakeClock clock;
  auto a = std::make_shared<SlidingWindowLimiter>(1, to_micros(1s));
  LimiterStack stack({a});
  EXPECT_TRUE(*stack.try_acquire(clock.now()));
  EXPECT_FALSE(*stack.try_acquire(clock.now()));
  clock.advance(1s);
  EXPECT_TRUE(*stack.try_acquire(clock.now()));
}

TEST(LimiterStack_Reserve, EmptyStackLetsEveryCallGoNow) {
  FakeClock clock;
  LimiterStack none;
  auto r = must(none.reserve(clock.now()));
  EXPECT_EQ(r.at(), clock.now());
  EXPECT_TRUE(*none.start(r, clock.now()));
}

TEST(LimiterStack_Reserve, ConcurrentCallersNeverShareASlot) {
  FakeClock clock;
  auto a = std::make_shared<SlidingWindowLimiter>(5, to_micros(1s));
  auto b = std::make_shared<TokenBucketLimiter>(5, to_micros(1s), 5);
  LimiterStack stack({a, b});
  std::vector<std::vector<TimePoint>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r = stack.reserve(clock.now());
        ASSERT_TRUE(r);
        // Each thread starts at its own slot's time, in whatever order the
        // threads run: one that comes after a later start may have to wait a
        // little for the room, and then starts.
        TimePoint at = r->at();
        for (int tries = 0; !*stack.start(*r, at); ++tries) {
          ASSERT_LT(tries, 1000);
          at = r->at();
        }
        got[t].push_back(at);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<TimePoint> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  // 100 calls at 5 per second: any 6 consecutive starts span at least 1 s.
  for (std::size_t i = 5; i < all.size(); ++i) EXPECT_GE(all[i] - all[i - 5], 1s) << i;
}

}  // namespace
}  // namespace ratchet::limit
