// The clock every time decision in ratchet reads: run-at times, leases,
// limiter windows, backoff and deadlines.
//
// The engine takes a Clock so that hosts and tests can drive time by hand:
// FakeClock never moves unless told to, and code that waits on it wakes when
// the test advances it. Times are wall-clock (system_clock) because they are
// stored in the database and compared across processes.
//
// Thread-safety: every Clock is safe to use from many threads at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>

#include "ratchet/export.hpp"

namespace ratchet {

using TimePoint = std::chrono::system_clock::time_point;
using Duration = std::chrono::system_clock::duration;

class RATCHET_API Clock {
 public:
  virtual ~Clock() = default;

  virtual TimePoint now() const = 0;

  // Blocks until now() >= deadline or `stop` is requested. Returns true if the
  // deadline was reached, false if stopped first.
  virtual bool wait_until(TimePoint deadline, std::stop_token stop) const = 0;

  bool wait_for(Duration d, std::stop_token stop) const { return wait_until(now() + d, std::move(stop)); }
};

// The real wall clock.
class RATCHET_API SystemClock final : public Clock {
 public:
  TimePoint now() const override;
  bool wait_until(TimePoint deadline, std::stop_token stop) const override;

  // One shared instance; it has no state.
  static std::shared_ptr<const Clock> instance();
};

// A clock that stands still until advance() or set() moves it. Waiters wake
// as soon as the fake time reaches their deadline.
class RATCHET_API FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{} + std::chrono::hours(24 * 365 * 50));

  TimePoint now() const override;
  bool wait_until(TimePoint deadline, std::stop_token stop) const override;

  void advance(Duration d);
  void set(TimePoint t);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  TimePoint now_;
};

}  // namespace ratchet
