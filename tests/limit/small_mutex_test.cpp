// The keyed limiters' four-byte lock: it must exclude as std::mutex does
// under contention (the counts below come out exact, and ThreadSanitizer
// sees no race), and an unlock must wake a waiter (a lost wake-up hangs the
// test).
#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "limit/small_mutex.hpp"

namespace ratchet::limit {
namespace {

TEST(SmallMutex, ExcludesUnderContention) {
  SmallMutex mu;
  // Not atomic: only the lock keeps its increments whole. Volatile, so each
  // is a read and a write apart, where another thread can come between.
  volatile std::int64_t plain = 0;
  constexpr int kThreads = 4;
  constexpr int kEach = 200'000;
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      go.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard lock(mu);
        const std::int64_t seen = plain;
        plain = seen + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(plain, std::int64_t{kThreads} * kEach);
}

TEST(SmallMutex, LongHoldsWakeEveryWaiter) {
  // Each holder keeps the lock long enough that the others go to sleep on
  // it: every unlock must wake one of them, or the run never ends.
  SmallMutex mu;
  std::vector<int> order;
  constexpr int kThreads = 6;
  constexpr int kRounds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::lock_guard lock(mu);
        order.push_back(t);
        for (int spin = 0; spin < 500; ++spin) std::this_thread::yield();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(order.size(), static_cast<std::size_t>(kThreads * kRounds));
}

TEST(SmallMutex, TryLockFailsWhileHeld) {
  SmallMutex mu;
  ASSERT_TRUE(mu.try_lock());
  bool other = true;
  std::thread([&] { other = mu.try_lock(); }).join();
  EXPECT_FALSE(other);
  mu.unlock();
  std::thread([&] {
    other = mu.try_lock();
    if (other) mu.unlock();
  }).join();
  EXPECT_TRUE(other);
}

}  // namespace
}  // namespace ratchet::limit
