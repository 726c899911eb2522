// The lock of the state a keyed limit keeps for each key (its window, its
// bucket, its learned pace): four bytes where std::mutex takes forty, and a
// run may meet a hundred thousand keys, each with a limiter of its own.
//
// It behaves as std::mutex does for the limiters' use (lock_guard, never a
// condition variable): uncontended, one atomic exchange to lock and one to
// unlock; contended, a waiter sleeps in std::atomic::wait (a futex on
// Linux) instead of spinning. The three states of Drepper's "Futexes Are
// Tricky" (0: free, 1: held, 2: held and maybe waited on) let an unlock
// with no waiter skip the wake-up.
//
// Thread-safety: that of a mutex. Not recursive.
#pragma once

#include <atomic>
#include <cstdint>

namespace ratchet::limit {

class SmallMutex {
 public:
  SmallMutex() = default;
  SmallMutex(const SmallMutex&) = delete;
  SmallMutex& operator=(const SmallMutex&) = delete;

  void lock() {
    std::uint32_t seen = kFree;
    if (state_.compare_exchange_strong(seen, kHeld, std::memory_order_acquire, std::memory_order_relaxed))
      return;
    // Held: mark it waited on, then sleep until an unlock frees it. Taken
    // that way it stays marked, as another may still wait.
    if (seen != kWaited) seen = state_.exchange(kWaited, std::memory_order_acquire);
    while (seen != kFree) {
      state_.wait(kWaited, std::memory_order_relaxed);
      seen = state_.exchange(kWaited, std::memory_order_acquire);
    }
  }

  bool try_lock() {
    std::uint32_t seen = kFree;
    return state_.compare_exchange_strong(seen, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kWaited) state_.notify_one();
  }

 private:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kHeld = 1;
  static constexpr std::uint32_t kWaited = 2;
  std::atomic<std::uint32_t> state_{kFree};
};

static_assert(sizeof(SmallMutex) == 4);

}  // namespace ratchet::limit
