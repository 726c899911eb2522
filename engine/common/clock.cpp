#include "ratchet/clock.hpp"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace ratchet {
namespace {

std::int64_t boottime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t to_ns(Duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

// The monotonic clock's waits do not count a suspend, which the boot-time
// clock does: waiting in slices of at most this much keeps a wait across a
// suspend from ending late by more than one slice.
constexpr auto kLongestSlice = std::chrono::seconds(1);

}  // namespace

SystemClock::SystemClock() : base_ns_(to_ns(wall_base())) {}

TimePoint SystemClock::now() const {
  return TimePoint{} + std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(
                           boottime_ns() + base_ns_.load(std::memory_order_relaxed)));
}

bool SystemClock::wait_until(TimePoint deadline, std::stop_token stop) const {
  // condition_variable_any with a stop_token wakes promptly on stop; the mutex
  // is private to the wait because nothing else signals it.
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  for (;;) {
    const auto left = deadline - now();
    if (left <= Duration::zero()) return true;
    const auto slice = std::min<std::chrono::steady_clock::duration>(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(left) + std::chrono::microseconds(1),
        kLongestSlice);
    cv.wait_for(lock, stop, slice, [] { return false; });
    if (stop.stop_requested()) return now() >= deadline;
  }
}

Duration SystemClock::base() const {
  return std::chrono::duration_cast<Duration>(
      std::chrono::nanoseconds(base_ns_.load(std::memory_order_relaxed)));
}

void SystemClock::anchor(Duration base) const { base_ns_.store(to_ns(base), std::memory_order_relaxed); }

Duration SystemClock::wall_base() {
  const std::int64_t before = boottime_ns();
  const std::int64_t wall = to_ns(std::chrono::system_clock::now().time_since_epoch());
  const std::int64_t after = boottime_ns();
  return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(wall - before / 2 - after / 2));
}

std::string SystemClock::boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return {};
  return id;
}

std::shared_ptr<const SystemClock> SystemClock::instance() {
  static const auto clock = std::make_shared<const SystemClock>();
  return clock;
}

FakeClock::FakeClock(TimePoint start) : now_(start) {}

TimePoint FakeClock::now() const {
  std::lock_guard lock(mu_);
  return now_;
}

bool FakeClock::wait_until(TimePoint deadline, std::stop_token stop) const {
  std::unique_lock lock(mu_);
  return cv_.wait(lock, stop, [&] { return now_ >= deadline; });
}

void FakeClock::advance(Duration d) {
  {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  cv_.notify_all();
}

void FakeClock::set(TimePoint t) {
  {
    std::lock_guard lock(mu_);
    now_ = t;
  }
  cv_.notify_all();
}

}  // namespace ratchet
