#include "limit/fixed_window.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit {

FixedWindowLimiter::FixedWindowLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t guard_us)
    : rate_(rate), per_(per_us), guard_(guard_us) {}

bool FixedWindowLimiter::in_guard(std::int64_t t_us) const {
  return t_us - floor_div(t_us, per_) * per_ >= per_ - guard_;
}

std::int64_t FixedWindowLimiter::advance(std::int64_t now_us) {
  if (now_us > high_water_) {
    high_water_ = now_us;
    counts_.erase(counts_.begin(), counts_.lower_bound(floor_div(high_water_, per_)));
  }
  return high_water_;
}

std::int64_t FixedWindowLimiter::find(std::int64_t t_us) const {
  std::int64_t k = floor_div(t_us, per_);
  if (in_guard(t_us)) t_us = ++k * per_;
  for (auto it = counts_.find(k); it != counts_.end() && it->first == k && it->second >= rate_; ++it) {
    ++k;
    t_us = k * per_;
  }
  return t_us;
}

void FixedWindowLimiter::release(std::int64_t at_us) {
  auto it = counts_.find(floor_div(at_us, per_));
  if (it != counts_.end() && --it->second <= 0) counts_.erase(it);
}

bool FixedWindowLimiter::forgettable(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  advance(now_us);
  return counts_.empty();  // nothing in this window or a later one
}

Result<std::int64_t> FixedWindowLimiter::earliest(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  return find(std::max(t_us, advance(now_us)));
}

Result<Slot> FixedWindowLimiter::reserve(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  Slot slot;
  slot.at_us = find(std::max(t_us, advance(now_us)));
  ++counts_[floor_div(slot.at_us, per_)];
  return slot;
}

Result<UseResult> FixedWindowLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  const std::int64_t hw = advance(now_us);
  if (floor_div(now_us, per_) == floor_div(slot.at_us, per_) && !in_guard(now_us)) {
    slot.at_us = now_us;
    return UseResult::kStarted;
  }
  release(slot.at_us);
  slot.at_us = find(std::max(hw, now_us));
  ++counts_[floor_div(slot.at_us, per_)];
  return slot.at_us == now_us ? UseResult::kStarted : UseResult::kMoved;
}

Status FixedWindowLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  release(slot.at_us);
  return {};
}

void FixedWindowLimiter::count_started(std::span<const std::int64_t> starts_us) {
  std::lock_guard lock(mu_);
  for (std::int64_t at : starts_us) {
    if (floor_div(at, per_) >= floor_div(high_water_, per_)) ++counts_[floor_div(at, per_)];
  }
}

std::string FixedWindowLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " fixed window";
}

}  // namespace ratchet::limit
