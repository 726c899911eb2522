#include "limit/sliding_window.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"
#include "limit/sliding_log.hpp"

namespace ratchet::limit {

SlidingWindowLimiter::SlidingWindowLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t grant_per_us)
    : rate_(rate), per_(per_us), grant_per_(std::max(per_us, grant_per_us)) {}

std::int64_t SlidingWindowLimiter::advance(std::int64_t now_us) {
  if (now_us > high_water_) {
    high_water_ = now_us;
    // Entries at or before now - per are outside every interval that holds a
    // time >= now, so they no longer matter.
    log_.drop_through(high_water_ - grant_per_);
    started_.drop_through(started_floor());
  }
  return high_water_;
}

Result<std::int64_t> SlidingWindowLimiter::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                          std::int64_t units) {
  std::lock_guard lock(mu_);
  return sliding_earliest(log_.view(), rate_, grant_per_, std::max(t_us, advance(now_us)), fit(units));
}

Result<Slot> SlidingWindowLimiter::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  std::lock_guard lock(mu_);
  Slot slot;
  slot.units = units;
  slot.at_us = sliding_earliest(log_.view(), rate_, grant_per_, std::max(t_us, advance(now_us)), fit(units));
  log_.insert(slot.at_us, units);
  return slot;
}

Result<std::int64_t> SlidingWindowLimiter::ready_at(Slot& slot, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  const std::int64_t t = std::max({slot.at_us, now_us, advance(now_us) - kLateReadingUs});
  return sliding_earliest(started_.view(), rate_, per_, t, fit(slot.units));
}

Result<UseResult> SlidingWindowLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  return start_locked(slot, now_us);
}

Result<UseResult> SlidingWindowLimiter::restart(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(
        Error::invalid_argument("a limiter start was recounted before it was made (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  // The start leaves the calls started; its entry in the granted log stays,
  // as the slot it was, until start_locked moves it to its new time.
  if (slot.started) started_.erase(slot.at_us, slot.units);
  slot.started = false;
  return start_locked(slot, now_us);
}

Status SlidingWindowLimiter::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  std::lock_guard lock(mu_);
  advance(now_us);
  if (slot.started) started_.erase(slot.at_us, slot.units);
  slot.started = false;
  log_.erase(slot.at_us, slot.units);
  slot.at_us = std::max(slot.at_us, to_us);
  log_.insert(slot.at_us, slot.units);
  return {};
}

UseResult SlidingWindowLimiter::start_locked(Slot& slot, std::int64_t now_us) {
  // The calls started decide; the granted slots only say when to come (see
  // TokenBucketLimiter::start). A slot used on time always fits.
  const std::int64_t t = std::max(now_us, advance(now_us) - kLateReadingUs);
  const std::int64_t at = sliding_earliest(started_.view(), rate_, per_, t, fit(slot.units));
  log_.erase(slot.at_us, slot.units);
  if (at > now_us) {
    slot.at_us = at;
    log_.insert(at, slot.units);
    return UseResult::kMoved;
  }
  log_.insert(now_us, slot.units);
  started_.insert(now_us, slot.units);
  slot.at_us = now_us;
  slot.started = true;
  return UseResult::kStarted;
}

Status SlidingWindowLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  // Already pruned means it no longer counted anyway.
  log_.erase(slot.at_us, slot.units);
  if (slot.started) started_.erase(slot.at_us, slot.units);
  return {};
}

Status SlidingWindowLimiter::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  if (!slot.started) return adjust_needs_start(slot);
  std::lock_guard lock(mu_);
  advance(now_us);
  // Entries at the call's start: exact either way (a pruned start no
  // longer counts in any window that is still to come).
  if (slot.at_us > high_water_ - grant_per_) {
    if (units > slot.units) {
      log_.insert(slot.at_us, units - slot.units);
    } else {
      log_.erase(slot.at_us, slot.units - units);
    }
  }
  if (slot.at_us > started_floor()) {
    if (units > slot.units) {
      started_.insert(slot.at_us, units - slot.units);
    } else {
      started_.erase(slot.at_us, slot.units - units);
    }
  }
  slot.units = units;
  return {};
}

void SlidingWindowLimiter::count_started(std::span<const Start> starts) {
  std::lock_guard lock(mu_);
  for (const Start& s : starts) {
    if (s.at_us > high_water_ - grant_per_) log_.insert(s.at_us, s.units);
    // Else outside every window that still counts.
    if (s.at_us > started_floor()) started_.insert(s.at_us, s.units);
  }
}

bool SlidingWindowLimiter::forgettable(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  advance(now_us);
  return log_.empty();  // no start in the window, no slot held
}

std::string SlidingWindowLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " sliding window";
}

}  // namespace ratchet::limit
