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
  }
  return high_water_;
}

void SlidingWindowLimiter::insert(std::int64_t at_us) {
  log_.insert(std::upper_bound(log_.begin(), log_.end(), at_us), at_us);
}

bool SlidingWindowLimiter::erase_one(std::int64_t at_us) {
  auto it = std::lower_bound(log_.begin(), log_.end(), at_us);
  if (it == log_.end() || *it != at_us) return false;
  log_.erase(it);
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
  insert(slot.at_us);
  return slot;
}

Result<UseResult> SlidingWindowLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  if (now_us == slot.at_us) return UseResult::kStarted;
  erase_one(slot.at_us);
  const std::int64_t hw = advance(now_us);
  if (hw == now_us && sliding_fits(log_, rate_, per_, now_us)) {
    insert(now_us);
    slot.at_us = now_us;
    return UseResult::kStarted;
  }
  slot.at_us = sliding_earliest(log_, rate_, per_, std::max(hw, now_us));
  insert(slot.at_us);
  return UseResult::kMoved;
}

Status SlidingWindowLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  erase_one(slot.at_us);  // already pruned means it no longer counted anyway
  return {};
}

std::string SlidingWindowLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " sliding window";
}

}  // namespace ratchet::limit
