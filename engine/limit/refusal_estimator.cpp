#include "limit/refusal_estimator.hpp"

#include <algorithm>

namespace ratchet::limit {

void RefusalEstimator::add_start(Stretch& stretch, std::int64_t started_us) {
  ++stretch.admitted;
  stretch.starts.push_back(started_us);
  if (stretch.starts.size() > 2 * kMaxStarts) {
    // Keep the latest: the drain that ends at the refusal.
    std::sort(stretch.starts.begin(), stretch.starts.end());
    stretch.starts.erase(stretch.starts.begin(),
                         stretch.starts.end() - static_cast<std::ptrdiff_t>(kMaxStarts));
  }
}

std::optional<RefusalReading> RefusalEstimator::admitted(std::int64_t started_us) {
  fit_.answered(started_us, true);
  if (!begun_) {
    begun_ = true;
    current_.start_us = started_us;
  }
  if (started_us >= current_.start_us) {
    add_start(current_, started_us);
    return std::nullopt;
  }
  // Its reply came after the refusal's (an admitted call may take longer
  // than a refusal to answer): it still counts in the stretch it was
  // admitted in, and the last reading is taken again with it.
  bool late = false;
  for (std::optional<Stretch>* s : {&ended_, &reference_}) {
    if (*s && started_us >= (*s)->start_us && started_us < (*s)->refused_us) {
      add_start(**s, started_us);
      late = late || s == &ended_;
    }
  }
  if (!late) return std::nullopt;
  RefusalReading reading;
  if (compared_) reading = read(*compared_, *ended_);
  reading.not_a_bucket = not_a_bucket_;
  reading.late = true;
  reading.admitted = ended_->admitted;
  reading.length_us = ended_->refused_us - ended_->start_us;
  return reading;
}

RefusalReading RefusalEstimator::read(const Stretch& reference, const Stretch& s) {
  RefusalReading reading;
  std::optional<Line> line = tangent(reference, s);
  if (!line) line = lower_bound(reference, s);
  if (line) {
    const BucketShape shape = fit_.fit({line->rate, std::max(0.0, line->burst)});
    line = Line{shape.rate, shape.burst};
  }
  // A bucket admits no more than its rate over a whole stretch and the
  // pause after it (B + r T, with at most B refilled in the pause): a
  // bucket's rate is at least that. A reading under it is raised to the
  // slowest bucket at or above it that fits every answer; none fits, and
  // the server is no bucket: a fixed window, say, admits its quota whatever
  // the stretch's length. A bound read while the stretch's first calls
  // were still being answered (a proxy that refuses at once and forwards
  // the rest) was 2.4/s against a bucket of 6/s, and took it for no bucket.
  if (line && cycle_) {
    const double least = static_cast<double>(cycle_->admitted) / static_cast<double>(cycle_->length_us);
    if (line->rate < least) {
      const std::optional<BucketShape> raised = fit_.slowest_from(least, line->burst);
      if (raised) {
        line = Line{raised->rate, raised->burst};
      } else {
        line.reset();
        not_a_bucket_ = true;
      }
    }
  }
  if (line) {
    reading.rate = line->rate;
    reading.burst = line->burst;
  } else if (!not_a_bucket_) {
    if (const std::optional<BucketShape> shape = fit_.midst()) {
      reading.rate = shape->rate;
      reading.burst = shape->burst;
    }
  }
  if (reading.rate) reading.fastest = fit_.fastest_from(*reading.rate);
  reading.not_a_bucket = not_a_bucket_;
  return reading;
}

std::optional<RefusalReading> RefusalEstimator::refused(std::int64_t started_us, std::int64_t resume_us) {
  fit_.answered(started_us, false);
  if (!begun_) {
    begun_ = true;
    current_.start_us = started_us;
  }
  if (started_us < current_.start_us) return std::nullopt;
  current_.refused_us = started_us;
  cycle_.reset();
  if (ended_ && current_.start_us > ended_->start_us) {
    cycle_ = Cycle{ended_->admitted, current_.start_us - ended_->start_us};
  }
  RefusalReading reading;
  if (reference_) reading = read(*reference_, current_);
  reading.not_a_bucket = not_a_bucket_;
  reading.admitted = current_.admitted;
  reading.length_us = started_us - current_.start_us;
  compared_ = reference_;
  if (!reference_ || reading.length_us < reference_->refused_us - reference_->start_us) reference_ = current_;
  ended_ = std::move(current_);
  current_ = Stretch{};
  current_.start_us = std::max(started_us, resume_us);
  return reading;
}

std::optional<RefusalEstimator::Line> RefusalEstimator::tangent(const Stretch& a, const Stretch& b) {
  struct Point {
    double length;
    double admitted;
    bool of_b;
  };
  std::vector<Point> points;
  for (const Stretch* s : {&a, &b}) {
    std::vector<std::int64_t> starts = s->starts;
    std::sort(starts.begin(), starts.end());
    const auto n = static_cast<double>(s->admitted);
    for (std::size_t i = 0; i < starts.size(); ++i) {
      points.push_back({static_cast<double>(s->refused_us - starts[i]), n - static_cast<double>(i), s == &b});
    }
  }
  std::sort(points.begin(), points.end(), [](const Point& p, const Point& q) {
    return p.length < q.length || (p.length == q.length && p.admitted > q.admitted);
  });
  // The upper hull, by length (Andrew's monotone chain).
  std::vector<Point> hull;
  for (const Point& p : points) {
    if (!hull.empty() && hull.back().length == p.length) continue;  // the higher one is in
    while (hull.size() >= 2) {
      const Point& o = hull[hull.size() - 2];
      const Point& m = hull.back();
      const double cross = (m.length - o.length) * (p.admitted - o.admitted) -
                           (m.admitted - o.admitted) * (p.length - o.length);
      if (cross < 0) break;  // m is above the chord from o to p
      hull.pop_back();
    }
    hull.push_back(p);
  }
  // The steepest chord between a point of each, far enough apart, that no
  // hull point between its ends rises above by more than the tolerance. On
  // a concave hull, the chords from one point get shallower and the points
  // between rise further above them as the far end moves on, and the point
  // that rises most moves on with it: one pass over the far ends for each
  // near one, stopped at the first chord too far under the hull.
  std::optional<Line> best;
  const auto above = [&](std::size_t i, double rate, std::size_t k) {
    return hull[k].admitted - (hull[i].admitted + rate * (hull[k].length - hull[i].length));
  };
  for (std::size_t i = 0; i < hull.size(); ++i) {
    std::size_t highest = i + 1;
    for (std::size_t j = i + 1; j < hull.size(); ++j) {
      const Point& p = hull[i];
      const Point& q = hull[j];
      const double rate = (q.admitted - p.admitted) / (q.length - p.length);
      if (j > i + 1) {
        while (highest + 1 < j && above(i, rate, highest + 1) >= above(i, rate, highest)) ++highest;
        if (above(i, rate, highest) > kTolerance) break;
      }
      if (p.of_b != q.of_b && q.length - p.length >= static_cast<double>(kMinStretchGapUs) &&
          q.admitted - p.admitted >= 2) {
        // A bucket holds a call at least. A chord through about nothing at
        // length zero is the calls in flight sent as fast as they came back
        // (eight at 48 ms: 167 a second), whatever the server's rate: parts
        // of both stretches sent so lie on it. The chords further on are
        // shallower, and one of them is the bucket's.
        const double burst = p.admitted - rate * p.length;
        if (burst < kMinBurst) continue;
        if (!best || rate > best->rate) best = Line{rate, burst};
        break;  // the chords further on are shallower
      }
    }
  }
  return best;
}

std::optional<RefusalEstimator::Line> RefusalEstimator::lower_bound(const Stretch& ref, const Stretch& s) {
  // A bucket whose drains are all shorter than the gap (a small one, or one
  // sent to much faster than it refills) touches no tangent that far apart.
  // The parts of the longer stretch, each against the whole of the shorter,
  // still give rates the server allows at least: the largest of them.
  const auto length = [](const Stretch& x) { return x.refused_us - x.start_us; };
  const Stretch& shorter = length(ref) <= length(s) ? ref : s;
  const Stretch& longer = &shorter == &ref ? s : ref;
  std::vector<std::int64_t> starts = longer.starts;
  std::sort(starts.begin(), starts.end());
  std::optional<Line> best;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t l = longer.refused_us - starts[i];
    const auto a = longer.admitted - static_cast<std::int64_t>(i);
    if (l - length(shorter) < kMinStretchGapUs || a - shorter.admitted < 2) continue;
    const double rate = static_cast<double>(a - shorter.admitted) / static_cast<double>(l - length(shorter));
    if (!best || rate > best->rate) {
      best = Line{rate, static_cast<double>(shorter.admitted) - rate * static_cast<double>(length(shorter))};
    }
  }
  return best;
}

}  // namespace ratchet::limit
