// The clock every time decision in ratchet reads: run-at times, leases,
// limiter windows, backoff and deadlines.
//
// The engine takes a Clock so that hosts and tests can drive time by hand:
// FakeClock never moves unless told to, and code that waits on it wakes when
// the test advances it.
//
// SystemClock is the wall clock made continuous. It reads the wall clock
// once, when it is anchored, and from then on advances with the machine's
// boot-time clock (CLOCK_BOOTTIME: monotonic, and counting suspend). A step
// of the wall clock after that (an NTP step, `date -s`, a VM's clock sync)
// does not move it, so a step forward cannot make a limiter forget the calls
// of the last second, and a step back cannot leave a parked job or a lease
// an hour long. Times are still on the wall clock's scale because they are
// stored in the database and compared across processes: an engine anchors
// its SystemClock to the base that the database holds for the running boot
// (written by the first process to open it since the machine started), so
// every process on one machine that shares a database reads one timeline.
// After a step, that timeline and the wall clock differ by the step until
// the machine restarts; the engine logs the difference when it sees it.
//
// Thread-safety: every Clock is safe to use from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

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

// The wall clock made continuous (see above).
class RATCHET_API SystemClock final : public Clock {
 public:
  // Anchored at the wall clock's reading now.
  SystemClock();

  TimePoint now() const override;
  // Waits on the monotonic clock, so a wall-clock step neither shortens nor
  // lengthens the wait.
  bool wait_until(TimePoint deadline, std::stop_token stop) const override;

  // now() minus the boot-time clock: what the clock adds to the time since
  // boot. anchor() sets it, so that clocks of several processes agree; a
  // change is a step of this clock, so engines anchor before they start.
  Duration base() const;
  void anchor(Duration base) const;

  // The wall clock's base right now (system_clock minus CLOCK_BOOTTIME): it
  // differs from base() by every wall-clock step since the anchoring.
  static Duration wall_base();
  // Identifies the running boot of the machine (/proc/sys/kernel/random/boot_id);
  // empty when the system does not say.
  static std::string boot_id();

  // One shared instance, anchored at its first use.
  static std::shared_ptr<const SystemClock> instance();

 private:
  mutable std::atomic<std::int64_t> base_ns_;
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
