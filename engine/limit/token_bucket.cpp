#include "limit/token_bucket.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"

namespace ratchet::limit {

namespace {

Gcra guarded(Gcra g, std::int64_t guard_us) {
  g.tolerance_us = std::max<std::int64_t>(0, g.tolerance_us - guard_us);
  return g;
}

}  // namespace

TokenBucketLimiter::TokenBucketLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t burst,
                                       std::int64_t guard_us, std::int64_t check_per_us)
    : rate_(rate),
      per_(per_us),
      burst_(burst),
      gcra_(guarded(Gcra::make(rate, per_us, burst), guard_us)),
      check_(guarded(Gcra::make(rate, check_per_us > 0 ? std::min(check_per_us, per_us) : per_us, burst),
                     guard_us)),
      tolerance_gap_(std::max<std::int64_t>(0, gcra_.tolerance_us - check_.tolerance_us)) {}

Result<std::int64_t> TokenBucketLimiter::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                        std::int64_t units) {
  std::lock_guard lock(mu_);
  return gcra_.earliest(tat_, std::max(now_us, t_us), units);
}

Result<Slot> TokenBucketLimiter::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  std::lock_guard lock(mu_);
  return gcra_.grant(tat_, std::max(now_us, t_us), units);
}

Result<std::int64_t> TokenBucketLimiter::ready_at(Slot& slot, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  return std::max(slot.at_us, check_.earliest(started_tat_, now_us, slot.units));
}

Result<UseResult> TokenBucketLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  return start_locked(slot, now_us);
}

Result<UseResult> TokenBucketLimiter::restart(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(
        Error::invalid_argument("a limiter start was recounted before it was made (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  // Taken back exactly when it is still the latest start; otherwise it stays
  // in the bucket beside the new one.
  if (slot.started && started_tat_ == slot.started_after_us) started_tat_ = slot.started_before_us;
  slot.started = false;
  return start_locked(slot, now_us);
}

Status TokenBucketLimiter::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  (void)now_us;
  std::lock_guard lock(mu_);
  // The slot's charge among those granted stays where it was.
  if (slot.started && started_tat_ == slot.started_after_us) started_tat_ = slot.started_before_us;
  slot.started = false;
  slot.at_us = std::max(slot.at_us, to_us);
  return {};
}

UseResult TokenBucketLimiter::start_locked(Slot& slot, std::int64_t now_us) {
  // The bucket holds what really started; the granted slots only say when
  // to come. A start at its slot's time always fits (the slots were granted
  // with every earlier slot counted), and a late one fits when the room is
  // still there; otherwise its holder waits for the next room, in its place.
  const std::int64_t allowed = check_.earliest(started_tat_, now_us, slot.units);
  if (now_us < allowed) {
    slot.at_us = allowed;
    return UseResult::kMoved;
  }
  slot.started = true;
  slot.started_before_us = started_tat_;
  started_tat_ = std::max(started_tat_, now_us) + check_.charge(slot.units);
  slot.started_after_us = started_tat_;
  // Slots granted from now on queue behind what really started.
  tat_ = std::max(tat_, started_tat_ + tolerance_gap_);
  slot.at_us = now_us;
  return UseResult::kStarted;
}

Status TokenBucketLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  if (slot.started && started_tat_ == slot.started_after_us) started_tat_ = slot.started_before_us;
  gcra_.give_back(tat_, slot);
  return {};
}

Status TokenBucketLimiter::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  (void)now_us;
  if (!slot.started) return adjust_needs_start(slot);
  std::lock_guard lock(mu_);
  const bool latest = tat_ == started_tat_ + tolerance_gap_;
  check_.correct(started_tat_, slot.started_before_us, slot.started_after_us, slot.at_us, slot.units, units);
  // Slots granted from now on queue behind the corrected charge; with none
  // granted after the start, they follow it down too.
  tat_ = latest ? started_tat_ + tolerance_gap_ : std::max(tat_, started_tat_ + tolerance_gap_);
  slot.started_after_us = started_tat_;
  slot.units = units;
  return {};
}

void TokenBucketLimiter::count_started(std::span<const Start> starts) {
  std::lock_guard lock(mu_);
  for (const Start& s : starts) {
    started_tat_ = std::max(started_tat_, s.at_us) + check_.charge(s.units);
    tat_ = std::max(tat_, started_tat_ + tolerance_gap_);
  }
}

bool TokenBucketLimiter::forgettable(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  // A TAT at or before now is a full bucket: the next call is spaced as by a new one.
  return tat_ <= now_us && started_tat_ <= now_us;
}

std::string TokenBucketLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " token bucket, burst " + std::to_string(burst_);
}

}  // namespace ratchet::limit
