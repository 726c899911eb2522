#include "ratchet/clock.hpp"

#include <thread>

namespace ratchet {

TimePoint SystemClock::now() const { return std::chrono::system_clock::now(); }

bool SystemClock::wait_until(TimePoint deadline, std::stop_token stop) const {
  // condition_variable_any with a stop_token wakes promptly on stop; the mutex
  // is private to the wait because nothing else signals it.
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_until(lock, stop, deadline, [] { return false; });
  return !stop.stop_requested() || std::chrono::system_clock::now() >= deadline;
}

std::shared_ptr<const Clock> SystemClock::instance() {
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
