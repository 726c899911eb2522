#include "limit/refusal_window.hpp"

#include <algorithm>
#include <climits>

#include "limit/micros.hpp"

namespace ratchet::limit {

namespace {

std::int64_t floor_mod(std::int64_t a, std::int64_t m) { return a - floor_div(a, m) * m; }

}  // namespace

void RefusalWindow::admitted(std::int64_t started_us) {
  // A call older than the starts kept counts nowhere.
  if (started_us < seen_from_us_) return;
  starts_.insert(std::upper_bound(starts_.begin(), starts_.end(), started_us), started_us);
  latest_us_ = std::max(latest_us_, started_us);
  const std::int64_t cutoff = latest_us_ - kSpanUs;
  auto keep = std::lower_bound(starts_.begin(), starts_.end(), cutoff);
  if (starts_.end() - keep > static_cast<std::ptrdiff_t>(kMaxStarts)) {
    keep = starts_.end() - static_cast<std::ptrdiff_t>(kMaxStarts);
  }
  if (keep != starts_.begin()) {
    // Windows from the first start kept on are still known whole; with
    // none kept (every start older than the span behind a later refusal),
    // from the span's start on, where nothing was admitted.
    seen_from_us_ = keep != starts_.end() ? *keep : cutoff;
    starts_.erase(starts_.begin(), keep);
    while (!refusals_.empty() && refusals_.front() < seen_from_us_) refusals_.pop_front();
  }
}

void RefusalWindow::refused(std::int64_t started_us) {
  if (started_us < seen_from_us_) return;
  refusals_.push_back(started_us);
  while (refusals_.size() > kMaxRefusals) refusals_.pop_front();
  latest_us_ = std::max(latest_us_, started_us);
}

void RefusalWindow::forget_before(std::int64_t from_us) {
  starts_.erase(starts_.begin(), std::lower_bound(starts_.begin(), starts_.end(), from_us));
  seen_from_us_ = std::max(seen_from_us_, from_us);
  refusals_.clear();
}

std::vector<std::int64_t> RefusalWindow::starts_from(std::int64_t from_us) const {
  return {std::lower_bound(starts_.begin(), starts_.end(), from_us), starts_.end()};
}

std::optional<WindowReading> RefusalWindow::read(std::int64_t window_us, int refusals) const {
  refusals = std::max(2, refusals);
  if (refusals_.size() < static_cast<std::size_t>(refusals) || window_us < kStepUs * kMaxArcShare) {
    return std::nullopt;
  }
  // A thousand phases at most, a millisecond apart at the least.
  const std::int64_t step = std::max(kStepUs, window_us / 1000);
  const std::int64_t steps = window_us / step;
  std::vector<std::int64_t> quota(static_cast<std::size_t>(steps), -1);  // -1: does not fit
  std::size_t spread_fits = 0;
  const auto count_in = [&](std::int64_t from, std::int64_t to) {
    return std::lower_bound(starts_.begin(), starts_.end(), to) -
           std::lower_bound(starts_.begin(), starts_.end(), from);
  };
  for (std::int64_t i = 0; i < steps; ++i) {
    const std::int64_t phase = i * step;
    std::int64_t least = INT64_MAX;
    std::int64_t most = -1;
    std::int64_t shortest = INT64_MAX;  // from a window's first start to its refusal
    std::int64_t longest = -1;
    int counted = 0;
    for (const std::int64_t t : refusals_) {
      const std::int64_t begin = t - floor_mod(t - phase, window_us);
      if (begin < seen_from_us_) continue;  // its window is not known whole
      const auto first = std::lower_bound(starts_.begin(), starts_.end(), begin);
      const std::int64_t c = count_in(begin, t);
      if (c > 0) {
        shortest = std::min(shortest, t - *first);
        longest = std::max(longest, t - *first);
      }
      least = std::min(least, c);
      most = std::max(most, c);
      ++counted;
    }
    if (counted < refusals || most - least > kSlack || least <= 0 || longest < 0) continue;
    // A bucket admits more the longer it is sent to; a window its quota
    // however long its calls took to fill it. Refusals whose windows filled
    // over spans alike cannot tell the two apart: the spans must differ by
    // as long as a bucket of the window's rate takes to admit a few more,
    // at half the phases that fit at least (a phase on the arc's edge may
    // see a window's first start a call later).
    const bool spread = longest - shortest >= std::max(kMinSpreadUs, kSpreadCalls * window_us / least);
    // No window held more than the quota (the latest, so far).
    bool fits = true;
    for (std::size_t s = 0; s < starts_.size() && fits;) {
      // The starts of one window: [s, e).
      const std::int64_t k = floor_div(starts_[s] - phase, window_us);
      const std::int64_t begin = k * window_us + phase;
      std::size_t e = s + 1;
      while (e < starts_.size() && starts_[e] < begin + window_us) ++e;
      if (begin >= seen_from_us_ && static_cast<std::int64_t>(e - s) > least + kSlack) fits = false;
      s = e;
    }
    if (fits) {
      quota[static_cast<std::size_t>(i)] = least;
      if (spread) ++spread_fits;
    }
  }
  // The phases that fit: the shortest arc that holds them all must be
  // narrow (a few phases inside it may miss by a call: the starts are
  // discrete).
  std::vector<std::int64_t> fit;
  std::int64_t quota_read = INT64_MAX;
  for (std::int64_t i = 0; i < steps; ++i) {
    if (quota[static_cast<std::size_t>(i)] < 0) continue;
    fit.push_back(i);
    quota_read = std::min(quota_read, quota[static_cast<std::size_t>(i)]);
  }
  if (fit.empty() || spread_fits * 2 < fit.size()) return std::nullopt;
  std::size_t widest = 0;  // the widest gap between two phases that fit follows this one
  std::int64_t widest_gap = 0;
  for (std::size_t j = 0; j < fit.size(); ++j) {
    const std::int64_t gap = (fit[(j + 1) % fit.size()] - fit[j] + steps - 1) % steps + 1;
    if (gap > widest_gap) {
      widest_gap = gap;
      widest = j;
    }
  }
  std::optional<WindowReading> arc = WindowReading{quota_read, 0, 0};
  arc->earliest_us = fit[(widest + 1) % fit.size()] * step;
  arc->latest_us = arc->earliest_us + (steps - widest_gap) * step;
  const std::int64_t width = arc->latest_us - arc->earliest_us;
  // A wide arc is a boundary that always fell in a pause (each stretch
  // filled its window before the window ended): where the boundary is
  // stays in doubt, but not the quota, when every phase on the arc counts
  // the same.
  const bool one_quota = std::all_of(fit.begin(), fit.end(), [&](std::int64_t f) {
    return quota[static_cast<std::size_t>(f)] == quota_read;
  });
  if (width > window_us / kMaxArcShare && !(one_quota && width <= window_us * 3 / 4)) return std::nullopt;
  // Back into [0, window) for the earliest; the latest follows it.
  const std::int64_t shift = floor_div(arc->earliest_us, window_us) * window_us;
  arc->earliest_us -= shift;
  arc->latest_us -= shift;
  return arc;
}

}  // namespace ratchet::limit
