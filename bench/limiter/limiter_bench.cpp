// How long one limiter decision takes: uncontended (target < 200 ns) and with
// 8 threads contending for one limiter, and the limiters' lock against
// std::mutex, contended and not. A decision is reserve + start of a
// slot that is free now (the common path of a call that goes at once).
//
//   build/default/bench/limiter/limiter_bench
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>

#include "limit/database_limiter.hpp"
#include "limit/fixed_window.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/micros.hpp"
#include "limit/sliding_window.hpp"
#include "limit/small_mutex.hpp"
#include "limit/token_bucket.hpp"
#include "retry/call_gate.hpp"
#include "store/open_store.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"

namespace ratchet::limit {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;

// Time moves 1 ms per decision; the limit (1000/s) always has room.
template <typename L>
void decide(benchmark::State& state, L& limiter, std::int64_t& now) {
  for (auto _ : state) {
    now += 1000;
    auto slot = limiter.reserve(now, now);
    auto used = limiter.start(*slot, now);
    benchmark::DoNotOptimize(used);
  }
}

void BM_Uncontended_SlidingWindow(benchmark::State& state) {
  SlidingWindowLimiter l(1000, 1'000'000);
  std::int64_t now = kT0;
  decide(state, l, now);
}
BENCHMARK(BM_Uncontended_SlidingWindow);

void BM_Uncontended_TokenBucket(benchmark::State& state) {
  TokenBucketLimiter l(1000, 1'000'000, 10);
  std::int64_t now = kT0;
  decide(state, l, now);
}
BENCHMARK(BM_Uncontended_TokenBucket);

void BM_Uncontended_FixedWindow(benchmark::State& state) {
  FixedWindowLimiter l(1000, 1'000'000);
  std::int64_t now = kT0;
  decide(state, l, now);
}
BENCHMARK(BM_Uncontended_FixedWindow);

// The stacked path a call takes: 1000/s and 10^7/day sliding windows.
void BM_Uncontended_StackOfTwo(benchmark::State& state) {
  LimiterStack stack({std::make_shared<SlidingWindowLimiter>(1000, 1'000'000),
                      std::make_shared<SlidingWindowLimiter>(10'000'000, 86'400'000'000)});
  std::int64_t now = kT0;
  for (auto _ : state) {
    now += 1000;
    benchmark::DoNotOptimize(stack.try_acquire(from_micros(now)));
  }
}
BENCHMARK(BM_Uncontended_StackOfTwo);

// A call that must wait: its reservation is found and given back.
void BM_Uncontended_SlidingWindowWait(benchmark::State& state) {
  SlidingWindowLimiter l(10, 1'000'000);
  for (int i = 0; i < 10; ++i) (void)l.reserve(kT0, kT0);
  for (auto _ : state) {
    auto slot = l.reserve(kT0, kT0);
    benchmark::DoNotOptimize(slot);
    (void)l.cancel(*slot);
  }
}
BENCHMARK(BM_Uncontended_SlidingWindowWait);

// The whole decorator path of one call: admit + record on a gate with a
// breaker, one limit, the pacer and a concurrency cap.
void BM_Uncontended_CallGate(benchmark::State& state) {
  retry::CallGateParts parts;
  parts.breaker = std::make_shared<retry::CircuitBreaker>(config::BreakerSpec{});
  parts.limiters.push_back(std::make_shared<SlidingWindowLimiter>(1000, 1'000'000));
  parts.pacer = std::make_shared<AdaptivePacer>();
  parts.concurrency = ConcurrencyLimiter::make(8);
  retry::CallGate gate(parts);
  std::int64_t now = kT0;
  for (auto _ : state) {
    now += 1000;
    retry::CallState step(from_micros(now));
    auto a = gate.admit(step, from_micros(now));
    auto& go = std::get<retry::CallGate::Go>(a);
    benchmark::DoNotOptimize(
        gate.record(step, std::move(go.ticket), retry::Outcome::ok(), {}, from_micros(now)));
  }
}
BENCHMARK(BM_Uncontended_CallGate);

// A database-scope decision (one BEGIN IMMEDIATE transaction) on a WAL file
// with synchronous=NORMAL, as the engine's store opens it.
void BM_Uncontended_DatabaseSlidingWindow(benchmark::State& state) {
  const auto path =
      std::filesystem::temp_directory_path() / ("ratchet-bench-" + std::to_string(::getpid()) + ".db");
  {
    // The store's own migration makes the tables.
    store::StoreOptions o;
    o.database = path.string();
    if (auto created = store::open_store(o); !created)
      state.SkipWithError(created.error().to_string().c_str());
  }
  config::LimitSpec spec;
  spec.rate = 1000;
  spec.per = std::chrono::seconds(1);
  spec.scope = config::LimitScope::kDatabase;
  ConnectionFactory connect = store::sqlite_limiter_tables(path, std::chrono::seconds(5));
  {
    auto l = DatabaseLimiter::open(spec, "bench", connect);
    std::int64_t now = kT0;
    decide(state, **l, now);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}
BENCHMARK(BM_Uncontended_DatabaseSlidingWindow);

// 8 threads share one limiter (10^6 per second) and one clock that moves
// 1 us per decision, so nearly every call may go at once.
template <typename L>
void contended(benchmark::State& state, const std::shared_ptr<L>& limiter, std::atomic<std::int64_t>& clock) {
  for (auto _ : state) {
    const std::int64_t now = clock.fetch_add(1, std::memory_order_relaxed);
    auto slot = limiter->reserve(now, now);
    if (slot && slot->at_us <= now) {
      benchmark::DoNotOptimize(limiter->start(*slot, now));
    } else if (slot) {
      (void)limiter->cancel(*slot);
    }
  }
}

// Built before any benchmark thread starts, shared by all of them.
const auto g_sliding = std::make_shared<SlidingWindowLimiter>(1'000'000, 1'000'000);
const auto g_bucket = std::make_shared<TokenBucketLimiter>(1'000'000, 1'000'000, 100);
std::atomic<std::int64_t> g_clock{kT0};

void BM_Contended_SlidingWindow(benchmark::State& state) { contended(state, g_sliding, g_clock); }
BENCHMARK(BM_Contended_SlidingWindow)->Threads(8)->UseRealTime();

void BM_Contended_TokenBucket(benchmark::State& state) { contended(state, g_bucket, g_clock); }
BENCHMARK(BM_Contended_TokenBucket)->Threads(8)->UseRealTime();

// The limiters' lock against std::mutex, side by side: 8 threads take it
// around a critical section about as long as a decision's (a few dozen
// ns of work on shared state), so it is contended nearly always.
template <typename M>
void BM_Lock(benchmark::State& state) {
  static M mu;
  static std::int64_t shared[8] = {};
  for (auto _ : state) {
    std::lock_guard lock(mu);
    for (std::int64_t& s : shared) s = s * 3 + 1;
    benchmark::DoNotOptimize(shared);
  }
}
BENCHMARK(BM_Lock<std::mutex>)->Threads(8)->UseRealTime();
BENCHMARK(BM_Lock<SmallMutex>)->Threads(8)->UseRealTime();
BENCHMARK(BM_Lock<std::mutex>)->Threads(1)->UseRealTime();
BENCHMARK(BM_Lock<SmallMutex>)->Threads(1)->UseRealTime();

}  // namespace
}  // namespace ratchet::limit

BENCHMARK_MAIN();
