#include "limit/window_phase.hpp"

#include <algorithm>

namespace ratchet::limit {
namespace {

// Calls started this far apart reach a server in the order they started.
constexpr std::int64_t kOrderGap = 5'000;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

void WindowPhase::set_window(std::int64_t window_us) {
  if (window_us == window_us_) return;
  window_us_ = window_us;
  known_ = false;
}

std::int64_t WindowPhase::index(std::int64_t t) const { return floor_div(t - lo_, window_us_); }

void WindowPhase::started(std::int64_t at_us) {
  starts_.push_back(at_us);
  while (!starts_.empty() && (starts_.size() > 4096 || starts_.front() < at_us - 2 * window_us_))
    starts_.pop_front();
}

std::int64_t WindowPhase::corrected(std::int64_t started_us, std::int64_t replied_us) const {
  // The part of a reply's time beyond the quickest seen may have been spent
  // on the way there: the call may have been counted that much later.
  const std::int64_t rtt = replied_us - started_us;
  return started_us + std::max<std::int64_t>(0, min_rtt_us_ >= 0 ? rtt - min_rtt_us_ : 0);
}

void WindowPhase::replied(std::int64_t started_us, std::int64_t replied_us) {
  const std::int64_t rtt = std::max<std::int64_t>(0, replied_us - started_us);
  if (min_rtt_us_ < 0 || rtt < min_rtt_us_) min_rtt_us_ = rtt;
}

void WindowPhase::opened(std::int64_t started_us, std::int64_t replied_us) {
  const std::int64_t s = corrected(started_us, replied_us);
  opener_us_ = std::max(opener_us_, started_us);
  if (!known_) {
    // The calls counted in the window before, after its first, put its end
    // (this window's start) after the latest of them.
    const std::int64_t before = pending_lo_;
    pending_lo_ = started_us;  // counted in this window: its end is after it
    if (window_us_ <= 0) return;
    known_ = true;
    hi_ = s;
    lo_ = before > 0 && before > s - window_us_ && before < s ? before : s - window_us_;
    return;
  }
  const std::int64_t k = index(s);
  const std::int64_t into = s - lo_ - k * window_us_;
  if (into <= 0 || into >= width()) return;
  // The window before must have had a call of its own, or this one may
  // have opened it, long after its boundary.
  const std::int64_t before_from = hi_ + (k - 1) * window_us_;
  const bool busy = std::any_of(starts_.begin(), starts_.end(), [&](std::int64_t t) {
    return t >= before_from && t < started_us - kOrderGap;
  });
  if (busy) hi_ = s - k * window_us_;
}

void WindowPhase::counted(std::int64_t started_us) {
  if (started_us <= opener_us_) return;
  if (!known_) {
    pending_lo_ = std::max(pending_lo_, started_us);
    return;
  }
  const std::int64_t k = index(started_us);
  const std::int64_t into = started_us - lo_ - k * window_us_;
  // Only after the latest window's first call, and with that call before
  // this interval: otherwise the next window may have begun first.
  if (into <= 0 || into >= width() || opener_us_ > lo_ + k * window_us_) return;
  lo_ = started_us - k * window_us_;
}

void WindowPhase::refused(std::int64_t started_us) {
  if (!known_) {
    if (started_us > opener_us_) pending_lo_ = std::max(pending_lo_, started_us);
    return;
  }
  const std::int64_t k = index(started_us);
  const std::int64_t into = started_us - lo_ - k * window_us_;
  if (into > 0 && into < width()) {
    lo_ = started_us - k * window_us_;
  } else if (into >= width() && into < width() + (window_us_ - width()) / 2) {
    known_ = false;  // refused just after the boundary was thought to have passed
  }
}

void WindowPhase::ends_by(std::int64_t started_us, std::int64_t end_us) {
  if (!known_) return;
  const std::int64_t k = index(started_us);
  const std::int64_t into = started_us - lo_ - k * window_us_;
  // A call inside the interval may have come before or after its boundary:
  // which one ends its window is not known.
  if (into > 0 && into < width()) return;
  const std::int64_t end = end_after(started_us);
  // A stated end before the interval's start contradicts what the calls
  // showed (a clock step, a server that moved its windows): the calls win.
  if (end_us < end && end_us - (end - hi_) > lo_) hi_ = end_us - (end - hi_);
}

std::int64_t WindowPhase::end_after(std::int64_t started_us) const {
  const std::int64_t k = index(started_us);
  const std::int64_t into = started_us - lo_ - k * window_us_;
  // At lo the boundary is still ahead; inside the interval it may have
  // passed, and the window's end is the next one.
  return hi_ + (into == 0 ? k : k + 1) * window_us_;
}

std::pair<std::int64_t, std::int64_t> WindowPhase::span_before(std::int64_t end_us) const {
  // The first interval that ends at or after end_us: a window's end is
  // placed no later than the phase allows (AdaptivePacer), so this is the
  // boundary that ends it.
  const std::int64_t k = -floor_div(hi_ - end_us, window_us_);
  const std::int64_t from = lo_ + k * window_us_;
  return {from, std::max(from, std::min(end_us, hi_ + k * window_us_))};
}

std::int64_t WindowPhase::doubt(std::int64_t end_us) const {
  if (known_) {
    const auto [from, to] = span_before(end_us);
    return to - from;
  }
  return pending_lo_ > 0 && end_us > pending_lo_ ? end_us - pending_lo_ : 0;
}

std::int64_t WindowPhase::probe_before(std::int64_t end_us, std::int64_t probes) const {
  if (doubt(end_us) <= kResolution) return 0;
  if (!known_) return pending_lo_ + (end_us - pending_lo_) / (std::max<std::int64_t>(1, probes) + 1);
  const auto [from, to] = span_before(end_us);
  return from + (to - from) / 2;
}

}  // namespace ratchet::limit
