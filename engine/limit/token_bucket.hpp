// In-memory (process scope) token bucket limiter using GCRA: rate `rate` per
// `per` with bursts of up to `burst` calls. Used only when a limit declares a
// burst (docs/semantics.md, rule 7): after an idle spell it lets `burst` calls start
// at once.
//
// Reservations are granted in request order (each one after the previous);
// only the latest reservation can be given back exactly (limit/gcra_math.hpp).
//
// Slots are granted by one bucket and the calls that really start are
// checked against another, which may be a little faster (check_per_us): the
// slack between them lets a call that starts late, after its slot, go without
// pushing every later slot's holder back by as much. Without that slack a
// late start delays the next holder, who starts late in turn, and the delay
// only ever grows while a backlog lasts.
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <cstdint>
#include <mutex>

#include "limit/gcra_math.hpp"
#include "limit/limiter.hpp"
#include "limit/small_mutex.hpp"

namespace ratchet::limit {

class TokenBucketLimiter final : public Limiter {
 public:
  // rate >= 1, per_us >= 1, burst >= 1. A burst is held back by guard_us
  // (see make_limiter). Starts are checked against a bucket of check_per_us
  // (0: per_us; at most per_us) with the same guard.
  TokenBucketLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t burst, std::int64_t guard_us = 0,
                     std::int64_t check_per_us = 0);

  [[nodiscard]] Result<std::int64_t> ready_at(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Result<UseResult> restart(Slot& slot, std::int64_t now_us) override;
  [[nodiscard]] Status defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) override;
  [[nodiscard]] Status cancel(const Slot& slot) override;
  [[nodiscard]] Status adjust(Slot& slot, std::int64_t units, std::int64_t now_us) override;
  void count_started(std::span<const Start> starts) override;
  bool forgettable(std::int64_t now_us) override;
  std::string describe() const override;

 protected:
  [[nodiscard]] Result<std::int64_t> earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                    std::int64_t units) override;
  [[nodiscard]] Result<Slot> reserve_units(std::int64_t now_us, std::int64_t t_us,
                                           std::int64_t units) override;

 private:
  UseResult start_locked(Slot& slot, std::int64_t now_us);  // needs mu_

  const std::int64_t rate_;
  const std::int64_t per_;
  const std::int64_t burst_;
  const Gcra gcra_;   // grants the slots
  const Gcra check_;  // checks the starts
  // How much sooner than the checked bucket the granting one lets a call go
  // after a full bucket (its tolerance is longer): grants after a start are
  // held back by as much, so a call on time is never turned back.
  const std::int64_t tolerance_gap_;
  SmallMutex mu_;                           // one a key, of up to a hundred thousand
  std::int64_t tat_ = Gcra::kIdle;          // of every slot granted: when to come
  std::int64_t started_tat_ = Gcra::kIdle;  // of the calls started: who may go
};

}  // namespace ratchet::limit
