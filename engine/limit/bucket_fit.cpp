#include "limit/bucket_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ratchet::limit {

void BucketFit::answered(std::int64_t started_us, bool admitted) {
  // Replies come in any order; the starts are what the server saw, in order.
  const auto at = std::upper_bound(answers_.begin(), answers_.end(), started_us,
                                   [](std::int64_t t, const Answer& a) { return t < a.started_us; });
  const auto inserted = answers_.insert(at, Answer{started_us, admitted});
  // Counted by start: a call admitted before the first refusal may be
  // answered after it (a proxy refuses at once and forwards the rest).
  if (admitted) {
    if (!refused_yet_ || started_us < first_refused_us_) ++first_admitted_;
  } else if (!refused_yet_ || started_us < first_refused_us_) {
    refused_yet_ = true;
    first_refused_us_ = started_us;
    first_admitted_ = std::count_if(answers_.begin(), inserted, [](const Answer& a) { return a.admitted; });
  }
  if (answers_.size() > kMaxAnswers) trim();
}

void BucketFit::trim() {
  // Keep the latest half, from a start after a long gap: the bucket the
  // replay starts full there refilled in it, unless it takes longer.
  const std::size_t from = answers_.size() / 2;
  std::size_t cut = answers_.size();
  for (std::size_t i = std::max<std::size_t>(from, 1); i < answers_.size(); ++i) {
    if (answers_[i].started_us - answers_[i - 1].started_us >= kRefillUs) {
      cut = i;
      break;
    }
  }
  if (cut == answers_.size()) cut = from;  // no such gap: the replay starts full anyway
  answers_.erase(answers_.begin(), answers_.begin() + static_cast<std::ptrdiff_t>(cut));
}

bool BucketFit::replays(double interval_us, double burst, double jitter) const {
  const double tau = std::max(0.0, burst - 1) * interval_us;
  double tat = -std::numeric_limits<double>::infinity();
  for (const Answer& a : answers_) {
    const auto t = static_cast<double>(a.started_us);
    const double allowed_at = tat - tau;
    if (a.admitted) {
      if (t + jitter < allowed_at) return false;
      tat = std::max(tat, t) + interval_us;
    } else if (t - jitter >= allowed_at) {
      return false;
    }
  }
  return true;
}

std::optional<std::int64_t> BucketFit::nearest_size(double interval_us, double burst,
                                                    std::int64_t max_burst) const {
  std::optional<std::int64_t> best;
  for (std::int64_t b = 1; b <= max_burst; ++b) {
    if (!replays(interval_us, static_cast<double>(b), static_cast<double>(kJitterUs))) continue;
    if (!best || std::abs(static_cast<double>(b) - burst) < std::abs(static_cast<double>(*best) - burst)) {
      best = b;
    }
  }
  return best;
}

bool BucketFit::fits(const BucketShape& shape) const {
  if (shape.rate <= 0) return false;
  return replays(1.0 / shape.rate, shape.burst, static_cast<double>(kJitterUs));
}

BucketShape BucketFit::fit(const BucketShape& reading) const {
  if (answers_.empty() || reading.rate <= 0 || fits(reading)) return reading;
  const std::int64_t max_burst = std::min<std::int64_t>(kMaxBurst, first_admitted_ + 1);
  const double read_us = 1.0 / reading.rate;
  const double log_step = std::log(kGridStep);
  const double centre =
      std::log(std::clamp(read_us, static_cast<double>(kFastestUs), static_cast<double>(kSlowestUs)));
  const double lowest = std::max(std::log(static_cast<double>(kFastestUs)), centre - std::log(kReach));
  const double highest = std::min(std::log(static_cast<double>(kSlowestUs)), centre + std::log(kReach));
  // Outward from the reading's rate, a grid step at a time on either side,
  // the slower side first.
  const auto steps = static_cast<int>(std::ceil(std::log(kReach) / log_step));
  for (int k = 0; k <= steps; ++k) {
    for (const int side : {1, -1}) {
      if (k == 0 && side == -1) continue;
      const double l = centre + side * k * log_step;
      if (l < lowest || l > highest) continue;
      const double interval_us = std::exp(l);
      const std::optional<std::int64_t> best = nearest_size(interval_us, reading.burst, max_burst);
      if (!best) continue;
      // Within kKeepWithin of the reading: the tangent's rate stands (its
      // jitter, not a misreading).
      if (std::abs(l - centre) <= std::log(kKeepWithin)) return reading;
      return BucketShape{1.0 / interval_us, static_cast<double>(*best)};
    }
  }
  return reading;
}

bool BucketFit::fits_some(double interval_us) const {
  // No jitter allowed: a bucket a few milliseconds faster than the
  // server's fits its answers within kJitterUs, and a pace raised to one
  // draws refusals.
  double tat = -std::numeric_limits<double>::infinity();
  double tau = 0;
  for (const Answer& a : answers_) {
    if (!a.admitted) continue;
    const auto t = static_cast<double>(a.started_us);
    tau = std::max(tau, tat - t);
    tat = std::max(tat, t) + interval_us;
  }
  // (size - 1) * interval >= tau
  const double least = tau <= 0 ? 1 : std::ceil(tau / interval_us) + 1;
  const std::int64_t max_burst = std::min<std::int64_t>(kMaxBurst, first_admitted_ + 1);
  if (least > static_cast<double>(max_burst)) return false;
  return replays(interval_us, least, 0);
}

std::optional<double> BucketFit::fastest_from(double rate) const {
  if (answers_.empty() || rate <= 0) return std::nullopt;
  const double log_step = std::log(kGridStep);
  const double from = std::log(1.0 / rate);
  const double fastest = std::max(std::log(static_cast<double>(kFastestUs)), from - std::log(kReach));
  // From the first rate that fits (the reading itself, read from a tangent,
  // may miss by a little) to the last one before a run of kMostGap that do
  // not (whole sizes: a rate between two that fit may need a size between
  // two whole ones).
  std::optional<double> last;
  int gap = 0;
  for (double l = from; l >= fastest; l -= log_step) {
    if (fits_some(std::exp(l))) {
      last = l;
      gap = 0;
    } else if (last && ++gap > kMostGap) {
      break;
    }
  }
  if (!last) return std::nullopt;
  return 1.0 / std::exp(*last);
}

std::optional<BucketShape> BucketFit::slowest_from(double least_rate, double burst) const {
  if (answers_.empty() || least_rate <= 0) return std::nullopt;
  const std::int64_t max_burst = std::min<std::int64_t>(kMaxBurst, first_admitted_ + 1);
  const double log_step = std::log(kGridStep);
  const double slowest = std::min(std::log(1.0 / least_rate), std::log(static_cast<double>(kSlowestUs)));
  const double fastest = std::max(std::log(static_cast<double>(kFastestUs)), slowest - std::log(kReach));
  for (double l = slowest; l >= fastest; l -= log_step) {
    const double interval_us = std::exp(l);
    if (const auto best = nearest_size(interval_us, burst, max_burst)) {
      return BucketShape{1.0 / interval_us, static_cast<double>(*best)};
    }
  }
  return std::nullopt;
}

std::optional<BucketShape> BucketFit::midst() const {
  if (answers_.empty() || !refused_yet_) return std::nullopt;
  const std::int64_t max_burst = first_admitted_ + 1;
  if (max_burst > kMaxMidstBurst) return std::nullopt;
  const auto jitter = static_cast<double>(kJitterUs);
  const auto fits_at = [&](double interval_us) -> std::optional<std::int64_t> {
    for (std::int64_t b = 1; b <= max_burst; ++b) {
      if (replays(interval_us, static_cast<double>(b), jitter)) return b;
    }
    return std::nullopt;
  };
  const double log_step = std::log(kGridStep);
  const double lowest = std::log(static_cast<double>(kFastestUs));
  const auto steps =
      static_cast<int>(std::ceil((std::log(static_cast<double>(kSlowestUs)) - lowest) / log_step));
  std::optional<int> fastest;
  std::optional<int> slowest;
  for (int k = 0; k <= steps; ++k) {
    if (fits_at(std::exp(lowest + k * log_step))) {
      if (!fastest) fastest = k;
      slowest = k;
    }
  }
  // One fits at the slowest spacing tried: the span has no end.
  if (!fastest || *slowest == steps) return std::nullopt;
  if ((*slowest - *fastest) * log_step > std::log(kMostSpread)) return std::nullopt;
  // A quarter of the way from the fastest, or the nearest spacing to it
  // that fits (the buckets that fit need not make one span).
  const int middle = *fastest + (*slowest - *fastest + 3) / 4;
  for (int d = 0; d <= *slowest - *fastest; ++d) {
    for (const int k : {middle + d, middle - d}) {
      if (k < *fastest || k > *slowest) continue;
      const double interval_us = std::exp(lowest + k * log_step);
      if (const auto b = fits_at(interval_us)) return BucketShape{1.0 / interval_us, static_cast<double>(*b)};
    }
  }
  return std::nullopt;
}

}  // namespace ratchet::limit
