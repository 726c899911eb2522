#include "retry/circuit_breaker.hpp"

#include <algorithm>

namespace ratchet::retry {

CircuitBreaker::CircuitBreaker(config::BreakerSpec spec) : spec_(std::move(spec)) {}

void CircuitBreaker::open(TimePoint now) {
  state_ = BreakerState::kOpen;
  half_open_at_ = now + spec_.open_for;
  consecutive_ = 0;
  probes_in_flight_ = 0;
  probe_successes_ = 0;
  recent_.clear();
  recent_failures_ = 0;
}

void CircuitBreaker::prune(TimePoint now) {
  while (!recent_.empty() && recent_.front().first <= now - spec_.window) {
    if (recent_.front().second) --recent_failures_;
    recent_.pop_front();
  }
}

CircuitBreaker::Admission CircuitBreaker::admit(TimePoint now) {
  if (!spec_.enabled) return {true, false, std::nullopt};
  std::lock_guard lock(mu_);
  if (state_ == BreakerState::kOpen) {
    if (now < half_open_at_) return {false, false, half_open_at_};
    state_ = BreakerState::kHalfOpen;
    probes_in_flight_ = 0;
    probe_successes_ = 0;
  }
  if (state_ == BreakerState::kHalfOpen) {
    if (probes_in_flight_ + probe_successes_ >= std::max(spec_.half_open_probes, 1)) {
      return {false, false, std::nullopt};
    }
    ++probes_in_flight_;
    return {true, true, std::nullopt};
  }
  return {true, false, std::nullopt};
}

void CircuitBreaker::release_probe() {
  std::lock_guard lock(mu_);
  if (state_ == BreakerState::kHalfOpen && probes_in_flight_ > 0) --probes_in_flight_;
}

void CircuitBreaker::record(bool failure, bool probe, TimePoint now) {
  if (!spec_.enabled) return;
  std::lock_guard lock(mu_);
  if (state_ == BreakerState::kHalfOpen) {
    if (!probe) return;  // a call admitted before the breaker opened
    if (probes_in_flight_ > 0) --probes_in_flight_;
    if (failure) {
      open(now);
      return;
    }
    if (++probe_successes_ >= std::max(spec_.half_open_probes, 1)) {
      state_ = BreakerState::kClosed;
      consecutive_ = 0;
      recent_.clear();
      recent_failures_ = 0;
    }
    return;
  }
  if (state_ == BreakerState::kOpen) return;  // late replies of calls admitted before it opened
  consecutive_ = failure ? consecutive_ + 1 : 0;
  prune(now);
  recent_.emplace_back(now, failure);
  if (failure) ++recent_failures_;
  const bool too_many_in_a_row = consecutive_ >= std::max(spec_.consecutive_failures, 1);
  const bool ratio_too_high =
      spec_.failure_ratio && static_cast<int>(recent_.size()) >= spec_.min_calls &&
      static_cast<double>(recent_failures_) >= *spec_.failure_ratio * static_cast<double>(recent_.size());
  if (too_many_in_a_row || ratio_too_high) open(now);
}

BreakerState CircuitBreaker::state(TimePoint now) const {
  std::lock_guard lock(mu_);
  if (state_ == BreakerState::kOpen && now >= half_open_at_) return BreakerState::kHalfOpen;
  return state_;
}

}  // namespace ratchet::retry
