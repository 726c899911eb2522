#include "limit/refusal_estimator.hpp"

#include <algorithm>
#include <vector>

namespace ratchet::limit {

void RefusalEstimator::admitted(std::int64_t started_us) {
  if (!begun_) {
    begun_ = true;
    stretch_start_us_ = started_us;
  }
  if (started_us < stretch_start_us_) {
    // Its reply came after the refusal's: it still counts in the stretch it
    // was admitted in, which matters once that stretch is the reference.
    if (ended_ && started_us >= ended_->start_us && started_us < ended_->refused_us) {
      ++ended_->admitted;
      if (ended_->is_reference) ++reference_->admitted;
    }
    return;
  }
  ++admitted_;
  starts_.push_back(started_us);
  if (starts_.size() > kMaxStarts) starts_.pop_front();
}

std::optional<RefusalReading> RefusalEstimator::refused(std::int64_t started_us, std::int64_t resume_us) {
  if (!begun_) {
    begun_ = true;
    stretch_start_us_ = started_us;
  }
  if (started_us < stretch_start_us_) return std::nullopt;
  RefusalReading reading;
  const std::int64_t length = started_us - stretch_start_us_;
  reading.rate = estimate(started_us);
  reading.admitted = admitted_;
  reading.length_us = length;
  const bool shortest = !reference_ || length < reference_->length_us;
  if (shortest) reference_ = Stretch{length, admitted_};
  // A bucket admits no more than its rate over a whole stretch and the
  // pause after it (B + r T, with at most B refilled in the pause), so a
  // rate read below that is not a bucket's: a fixed window, say, admits its
  // quota whatever the stretch's length. It tells nothing.
  if (reading.rate && ended_ && stretch_start_us_ > ended_->start_us &&
      *reading.rate * static_cast<double>(stretch_start_us_ - ended_->start_us) <
          static_cast<double>(ended_->admitted)) {
    reading.rate.reset();
    not_a_bucket_ = true;
  } else if (reading.rate) {
    reading.burst = std::max(0.0, static_cast<double>(reference_->admitted) -
                                      *reading.rate * static_cast<double>(reference_->length_us));
  }
  reading.not_a_bucket = not_a_bucket_;
  ended_ = Ended{stretch_start_us_, started_us, admitted_, shortest};
  stretch_start_us_ = std::max(started_us, resume_us);
  admitted_ = 0;
  starts_.clear();
  return reading;
}

std::optional<double> RefusalEstimator::estimate(std::int64_t refused_us) const {
  if (!reference_) return std::nullopt;
  const Stretch& ref = *reference_;
  const Stretch whole{refused_us - stretch_start_us_, admitted_};
  auto rate = [](const Stretch& shorter, const Stretch& longer) -> std::optional<double> {
    if (longer.length_us - shorter.length_us < kMinStretchGapUs || longer.admitted - shorter.admitted < 2) {
      return std::nullopt;
    }
    return static_cast<double>(longer.admitted - shorter.admitted) /
           static_cast<double>(longer.length_us - shorter.length_us);
  };
  if (whole.length_us < ref.length_us) return rate(whole, ref);
  // The parts of this stretch that end at the refusal, from each admitted
  // start on: the one from the last moment the bucket was full is exact, the
  // others (the bucket not full at their start, or full for a while within)
  // admitted less than B + r T.
  std::optional<double> best = rate(ref, whole);
  std::vector<std::int64_t> starts(starts_.begin(), starts_.end());
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const Stretch part{refused_us - starts[i], static_cast<std::int64_t>(starts.size() - i)};
    if (auto r = rate(ref, part); r && (!best || *r > *best)) best = r;
  }
  return best;
}

}  // namespace ratchet::limit
