#include "limit/adaptive_pacer.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"
#include "limit/micros.hpp"

namespace ratchet::limit {

AdaptivePacer::AdaptivePacer(PacerOptions options) : options_(options) {}

void AdaptivePacer::observe(const PaceHint& hint, TimePoint now, std::optional<TimePoint> call_started) {
  const std::int64_t now_us = to_micros(now);
  const std::int64_t floor_us = to_micros(options_.floor);
  const std::int64_t max_us = std::max(to_micros(options_.max_interval), floor_us);
  std::lock_guard lock(mu_);
  if (hint.resume_at) resume_us_ = std::max(resume_us_, to_micros(*hint.resume_at));
  if (hint.interval) {
    learned_us_ = std::clamp(to_micros(*hint.interval), floor_us, max_us);
    interval_us_ = learned_us_;
    rate_at_decrease_ = 0;
  }
  if (hint.throttled && !hint.interval) {
    const bool in_flight_at_decrease = call_started && to_micros(*call_started) < decreased_at_us_;
    if (!in_flight_at_decrease) {
      // Multiplicative decrease from the pace actually used.
      double current = std::max<double>(static_cast<double>(interval_us_), gap_us_);
      if (current <= 0) current = static_cast<double>(to_micros(options_.first_interval)) * options_.decrease;
      const auto next = static_cast<std::int64_t>(current / options_.decrease);
      interval_us_ = std::clamp<std::int64_t>(next, std::max<std::int64_t>(floor_us, 1), max_us);
      rate_at_decrease_ = 1.0 / static_cast<double>(interval_us_);
      decreased_at_us_ = now_us;
      // Retry-After already says when to resume; a bare 429 pauses one interval.
      if (!hint.resume_at) resume_us_ = std::max(resume_us_, now_us + interval_us_);
    }
    return;
  }
  if (!hint.throttled && rate_at_decrease_ > 0) {
    // Additive increase back towards the learned (or declared) pace.
    const double rate = 1.0 / static_cast<double>(std::max<std::int64_t>(interval_us_, 1)) +
                        options_.recovery * rate_at_decrease_;
    // Back at the learned pace (or the declared one when nothing was learned),
    // pacing hands over to what the server said, or to the declared limiters.
    const std::int64_t target = std::max(learned_us_, floor_us);
    interval_us_ = static_cast<std::int64_t>(1.0 / rate);
    if (interval_us_ <= target) {
      interval_us_ = learned_us_;
      rate_at_decrease_ = 0;
    }
  }
}

Duration AdaptivePacer::interval() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration_cast<Duration>(std::chrono::microseconds(interval_us_));
}

TimePoint AdaptivePacer::resume_at() const {
  std::lock_guard lock(mu_);
  return from_micros(resume_us_);
}

std::int64_t AdaptivePacer::earliest_locked(std::int64_t t) const {
  return std::max({t, resume_us_, interval_us_ > 0 ? tat_ : t});
}

Result<std::int64_t> AdaptivePacer::earliest(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  return earliest_locked(std::max(now_us, t_us));
}

Result<Slot> AdaptivePacer::reserve(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  Slot s;
  s.at_us = earliest_locked(std::max(now_us, t_us));
  s.tat_before_us = tat_;
  tat_ = std::max(tat_, s.at_us + interval_us_);
  s.tat_after_us = tat_;
  return s;
}

Result<UseResult> AdaptivePacer::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  if (now_us < resume_us_) {
    // The server asked for a pause after this slot was granted.
    if (tat_ == slot.tat_after_us) tat_ = slot.tat_before_us;
    slot.at_us = earliest_locked(now_us);
    slot.tat_before_us = tat_;
    tat_ = std::max(tat_, slot.at_us + interval_us_);
    slot.tat_after_us = tat_;
    return UseResult::kMoved;
  }
  if (last_start_us_ > 0 && now_us > last_start_us_) {
    const double gap = static_cast<double>(now_us - last_start_us_);
    gap_us_ = gap_us_ <= 0 ? gap : 0.8 * gap_us_ + 0.2 * gap;
  }
  last_start_us_ = std::max(last_start_us_, now_us);
  if (now_us > slot.at_us && tat_ == slot.tat_after_us) {
    tat_ = std::max(slot.tat_before_us, now_us + interval_us_);
    slot.tat_after_us = tat_;
  }
  slot.at_us = now_us;
  return UseResult::kStarted;
}

Status AdaptivePacer::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  if (tat_ == slot.tat_after_us) tat_ = slot.tat_before_us;
  return {};
}

std::string AdaptivePacer::describe() const {
  std::lock_guard lock(mu_);
  return "learned pace " + common::format_duration(std::chrono::microseconds(interval_us_)) + " per call";
}

}  // namespace ratchet::limit
