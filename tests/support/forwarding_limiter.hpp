// Test helper: a limiter that is the limiter it wraps, for tests that watch
// or change one of its calls (override that one and call the base's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "limit/limiter.hpp"

namespace ratchet::testing {

class ForwardingLimiter : public limit::Limiter {
 public:
  explicit ForwardingLimiter(std::shared_ptr<limit::Limiter> inner) : inner_(std::move(inner)) {}

  Result<std::int64_t> ready_at(limit::Slot& slot, std::int64_t now_us) override {
    return inner_->ready_at(slot, now_us);
  }
  Result<limit::UseResult> start(limit::Slot& slot, std::int64_t now_us) override {
    return inner_->start(slot, now_us);
  }
  Result<limit::UseResult> restart(limit::Slot& slot, std::int64_t now_us) override {
    return inner_->restart(slot, now_us);
  }
  Status defer(limit::Slot& slot, std::int64_t now_us, std::int64_t to_us) override {
    return inner_->defer(slot, now_us, to_us);
  }
  Status cancel(const limit::Slot& slot) override { return inner_->cancel(slot); }
  Status adjust(limit::Slot& slot, std::int64_t units, std::int64_t now_us) override {
    return inner_->adjust(slot, units, now_us);
  }
  void count_started(std::span<const limit::Start> starts) override { inner_->count_started(starts); }
  void waiting(std::int64_t calls, std::int64_t now_us) override { inner_->waiting(calls, now_us); }
  bool forgettable(std::int64_t now_us) override { return inner_->forgettable(now_us); }
  std::string describe() const override { return inner_->describe(); }

 protected:
  Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) override {
    return inner_->earliest(now_us, t_us, units);
  }
  Result<limit::Slot> reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) override {
    return inner_->reserve(now_us, t_us, units);
  }

 private:
  std::shared_ptr<limit::Limiter> inner_;
};

}  // namespace ratchet::testing
