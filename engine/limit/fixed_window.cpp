#include "limit/fixed_window.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit {

FixedWindowLimiter::FixedWindowLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t guard_us,
                                       std::int64_t offset_us)
    : rate_(rate),
      per_(per_us),
      guard_(guard_us),
      offset_(offset_us - floor_div(offset_us, per_us) * per_us) {}

std::int64_t FixedWindowLimiter::index_of(std::int64_t t_us) const { return floor_div(t_us - offset_, per_); }

std::int64_t FixedWindowLimiter::start_of(std::int64_t k) const { return k * per_ + offset_; }

bool FixedWindowLimiter::in_guard(std::int64_t t_us) const {
  return t_us - start_of(index_of(t_us)) >= per_ - guard_;
}

std::int64_t FixedWindowLimiter::advance(std::int64_t now_us) {
  if (now_us > high_water_) {
    high_water_ = now_us;
    counts_.erase(counts_.begin(), counts_.lower_bound(index_of(high_water_)));
    started_.erase(started_.begin(), started_.lower_bound(index_of(high_water_)));
  }
  return high_water_;
}

void FixedWindowLimiter::take(std::map<std::int64_t, std::int64_t>& m, std::int64_t k, std::int64_t units) {
  auto it = m.find(k);
  if (it != m.end() && (it->second -= units) <= 0) m.erase(it);
}

std::int64_t FixedWindowLimiter::find(std::int64_t t_us, std::int64_t units) const {
  const std::int64_t rate = rate_.load(std::memory_order_relaxed);
  const std::int64_t room = rate - std::min(units, rate);
  std::int64_t k = index_of(t_us);
  if (in_guard(t_us)) t_us = start_of(++k);
  for (auto it = counts_.find(k); it != counts_.end() && it->first == k && it->second > room; ++it) {
    ++k;
    t_us = start_of(k);
  }
  return t_us;
}

void FixedWindowLimiter::release(std::int64_t at_us, std::int64_t units) {
  take(counts_, index_of(at_us), units);
}

bool FixedWindowLimiter::forgettable(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  advance(now_us);
  return counts_.empty();  // nothing in this window or a later one
}

Result<std::int64_t> FixedWindowLimiter::earliest_units(std::int64_t now_us, std::int64_t t_us,
                                                        std::int64_t units) {
  std::lock_guard lock(mu_);
  return find(std::max(t_us, advance(now_us)), units);
}

Result<Slot> FixedWindowLimiter::reserve_units(std::int64_t now_us, std::int64_t t_us, std::int64_t units) {
  std::lock_guard lock(mu_);
  Slot slot;
  slot.units = units;
  slot.at_us = find(std::max(t_us, advance(now_us)), units);
  counts_[index_of(slot.at_us)] += units;
  return slot;
}

Result<UseResult> FixedWindowLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  return start_locked(slot, now_us);
}

Result<UseResult> FixedWindowLimiter::restart(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(
        Error::invalid_argument("a limiter start was recounted before it was made (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  // The start leaves the units started; its units among the slots granted
  // stay, as the slot it was, until start_locked uses or moves it.
  if (slot.started) take(started_, index_of(slot.at_us), slot.units);
  slot.started = false;
  return start_locked(slot, now_us);
}

Status FixedWindowLimiter::defer(Slot& slot, std::int64_t now_us, std::int64_t to_us) {
  std::lock_guard lock(mu_);
  const std::int64_t hw = advance(now_us);
  if (slot.started) take(started_, index_of(slot.at_us), slot.units);
  slot.started = false;
  const std::int64_t to = std::max(slot.at_us, to_us);
  if (index_of(to) == index_of(slot.at_us) && !in_guard(to)) {
    slot.at_us = to;  // counted in the same window
    return {};
  }
  // Another window: its count there, where there is room.
  release(slot.at_us, slot.units);
  slot.at_us = find(std::max(to, hw), slot.units);
  counts_[index_of(slot.at_us)] += slot.units;
  return {};
}

UseResult FixedWindowLimiter::start_locked(Slot& slot, std::int64_t now_us) {
  const std::int64_t hw = advance(now_us);
  const std::int64_t k = index_of(now_us);
  if (k == index_of(slot.at_us) && !in_guard(now_us)) {
    auto it = started_.find(k);
    const std::int64_t started = it == started_.end() ? 0 : it->second;
    if (const std::int64_t quota = rate(); started + std::min(slot.units, quota) <= quota) {
      started_[k] += slot.units;
      slot.at_us = now_us;
      slot.started = true;
      return UseResult::kStarted;
    }
  }
  release(slot.at_us, slot.units);
  slot.at_us = find(std::max(hw, now_us), slot.units);
  counts_[index_of(slot.at_us)] += slot.units;
  if (slot.at_us != now_us) return UseResult::kMoved;
  started_[k] += slot.units;
  slot.started = true;
  return UseResult::kStarted;
}

Status FixedWindowLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  release(slot.at_us, slot.units);
  if (slot.started) take(started_, index_of(slot.at_us), slot.units);
  return {};
}

Status FixedWindowLimiter::adjust(Slot& slot, std::int64_t units, std::int64_t now_us) {
  if (!slot.started) return adjust_needs_start(slot);
  std::lock_guard lock(mu_);
  // Counted in the window the call started in, while that window still
  // counts (an overdraft fills it; a refund frees room in it).
  const std::int64_t k = index_of(slot.at_us);
  if (k >= index_of(advance(now_us))) {
    if (units > slot.units) {
      counts_[k] += units - slot.units;
      started_[k] += units - slot.units;
    } else {
      take(counts_, k, slot.units - units);
      take(started_, k, slot.units - units);
    }
  }
  slot.units = units;
  return {};
}

void FixedWindowLimiter::count_started(std::span<const Start> starts) {
  std::lock_guard lock(mu_);
  for (const Start& s : starts) {
    if (index_of(s.at_us) < index_of(high_water_)) continue;
    counts_[index_of(s.at_us)] += s.units;
    started_[index_of(s.at_us)] += s.units;
  }
}

void FixedWindowLimiter::set_rate(std::int64_t rate) {
  std::lock_guard lock(mu_);
  rate_.store(std::max<std::int64_t>(1, rate), std::memory_order_relaxed);
}

std::string FixedWindowLimiter::describe() const {
  return std::to_string(rate()) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " fixed window";
}

}  // namespace ratchet::limit
