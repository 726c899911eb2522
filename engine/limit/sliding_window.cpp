#include "limit/sliding_window.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"
#include "limit/sliding_log.hpp"

namespace ratchet::limit {

SlidingWindowLimiter::SlidingWindowLimiter(std::int64_t rate, std::int64_t per_us)
    : rate_(rate), per_(per_us) {}

std::int64_t SlidingWindowLimiter::advance(std::int64_t now_us) {
  if (now_us > high_water_) {
    high_water_ = now_us;
    // Entries at or before now - per are outside every interval that holds a
    // time >= now, so they no longer matter.
    while (!log_.empty() && log_.front() <= high_water_ - per_) log_.pop_front();
    while (!started_.empty() && started_.front() <= high_water_ - per_) started_.pop_front();
  }
  return high_water_;
}

void SlidingWindowLimiter::insert(std::deque<std::int64_t>& log, std::int64_t at_us) {
  log.insert(std::upper_bound(log.begin(), log.end(), at_us), at_us);
}

bool SlidingWindowLimiter::erase_one(std::deque<std::int64_t>& log, std::int64_t at_us) {
  auto it = std::lower_bound(log.begin(), log.end(), at_us);
  if (it == log.end() || *it != at_us) return false;
  log.erase(it);
  return true;
}

Result<std::int64_t> SlidingWindowLimiter::earliest(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  return sliding_earliest(log_, rate_, per_, std::max(t_us, advance(now_us)));
}

Result<Slot> SlidingWindowLimiter::reserve(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  Slot slot;
  slot.at_us = sliding_earliest(log_, rate_, per_, std::max(t_us, advance(now_us)));
  insert(log_, slot.at_us);
  return slot;
}

Result<std::int64_t> SlidingWindowLimiter::ready_at(Slot& slot, std::int64_t now_us) {
  std::lock_guard lock(mu_);
  return sliding_earliest(started_, rate_, per_, std::max({slot.at_us, now_us, advance(now_us)}));
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
  if (slot.started) erase_one(started_, slot.at_us);
  slot.started = false;
  return start_locked(slot, now_us);
}

UseResult SlidingWindowLimiter::start_locked(Slot& slot, std::int64_t now_us) {
  // The calls started decide; the granted slots only say when to come (see
  // TokenBucketLimiter::start). A slot used on time always fits.
  const std::int64_t at = sliding_earliest(started_, rate_, per_, std::max(now_us, advance(now_us)));
  erase_one(log_, slot.at_us);
  if (at > now_us) {
    slot.at_us = at;
    insert(log_, at);
    return UseResult::kMoved;
  }
  insert(log_, now_us);
  insert(started_, now_us);
  slot.at_us = now_us;
  slot.started = true;
  return UseResult::kStarted;
}

Status SlidingWindowLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  // Already pruned means it no longer counted anyway.
  erase_one(log_, slot.at_us);
  if (slot.started) erase_one(started_, slot.at_us);
  return {};
}

void SlidingWindowLimiter::count_started(std::span<const std::int64_t> starts_us) {
  std::lock_guard lock(mu_);
  for (std::int64_t at : starts_us) {
    if (at <= high_water_ - per_) continue;  // outside every window that still counts
    insert(log_, at);
    insert(started_, at);
  }
}

std::string SlidingWindowLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " sliding window";
}

}  // namespace ratchet::limit
