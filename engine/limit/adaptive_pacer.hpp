// The pace a plugin learns from its server's replies (design.md point 7): a
// limiter in the plugin's stack whose spacing and pauses follow PaceHints.
//
//   - Retry-After / a reset with nothing remaining: no start before resume_at.
//   - A pace from the headers (reset / remaining, or window / quota): starts
//     are spaced by that interval.
//   - A 429 that gives no pace (bare, or with only Retry-After): multiplicative
//     decrease (the rate is multiplied by `decrease`, from the pace observed so
//     far when nothing was learned) and, when bare, a pause of one interval;
//     then each good reply adds `recovery` times the
//     rate at the decrease (additive increase) until the learned or declared
//     pace is reached again.
// Learned pace never goes faster than `floor` (the tightest declared limit's
// per/rate); the declared limiters stay in the stack anyway, so nothing
// learned can exceed a declared limit. Until the server says something the
// pacer imposes nothing (declared bursts stay usable), and once recovered
// from a bare 429 to the declared pace it stops pacing again. A 429 for a call that started before
// the latest decrease does not decrease again (replies of calls already in
// flight report the same overload).
//
// Thread-safety: all members are safe to call concurrently (one mutex).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include "limit/limiter.hpp"
#include "limit/rate_headers.hpp"

namespace ratchet::limit {

struct PacerOptions {
  Duration floor = Duration::zero();  // declared pace; zero: none declared
  double decrease = 0.5;              // rate factor on a bare 429, in (0, 1)
  double recovery = 0.02;             // per good reply, fraction of the rate at decrease
  Duration first_interval = std::chrono::milliseconds(100);  // pace after a 429 when nothing is known
  Duration max_interval = std::chrono::minutes(1);           // slowest pace a 429 storm can push to
};

class AdaptivePacer final : public Limiter {
 public:
  explicit AdaptivePacer(PacerOptions options = {});

  // Applies what one reply said. `call_started` is when the replying call
  // started (to recognise 429s from calls already in flight at a decrease).
  void observe(const PaceHint& hint, TimePoint now, std::optional<TimePoint> call_started = std::nullopt);

  Duration interval() const;    // the current spacing between starts (zero: none)
  TimePoint resume_at() const;  // no start before this (the epoch: no pause)

  Result<std::int64_t> earliest(std::int64_t now_us, std::int64_t t_us) override;
  Result<Slot> reserve(std::int64_t now_us, std::int64_t t_us) override;
  Result<UseResult> start(Slot& slot, std::int64_t now_us) override;
  Status cancel(const Slot& slot) override;
  std::string describe() const override;

 private:
  std::int64_t earliest_locked(std::int64_t t) const;

  const PacerOptions options_;
  mutable std::mutex mu_;
  std::int64_t interval_us_ = 0;
  std::int64_t learned_us_ = 0;  // pace the headers last gave (zero: none)
  std::int64_t resume_us_ = 0;
  std::int64_t tat_ = 0;
  std::int64_t last_start_us_ = 0;
  double gap_us_ = 0;  // moving average of the gaps between starts
  std::int64_t decreased_at_us_ = 0;
  double rate_at_decrease_ = 0;  // calls per microsecond
};

}  // namespace ratchet::limit
