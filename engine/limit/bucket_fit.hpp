// Checks a token bucket read from refusals against every call its server
// answered, and moves a reading that contradicts them to the nearest
// bucket that does not.
//
// The tangent of two stretches (refusal_estimator.hpp) reads a bucket from
// where its drains touch the line B + r L. A small bucket drains within a
// call or two of each refusal, so no two points of its drains lie far
// enough apart to read a slope from, and the tangent falls back on a bound
// far under the rate: a bucket of one refilled 8 times a second was read at
// 2.8 a second from a slow start that sent slower than that, and kept so.
// Yet the calls themselves tell such a bucket closely: one admitted 125 ms
// after the last says it refills at least every 125 ms, one refused 89 ms
// after says it needs more than 89.
//
// So every answered call is kept (its start, and whether it was admitted),
// and a bucket (rate r, size B) is replayed over them as the server keeps
// it (GCRA: a call at t goes when t >= TAT - (B - 1) / r, and TAT moves to
// max(TAT, t) + 1 / r), full at the first call. It fits when it admits
// each admitted call and refuses each refused one, give or take kJitterUs
// of arrival time either way: a call reaches its server a little after it
// started, by a time that varies from call to call. A reading that fits
// is kept as it is; one that does not is moved to the fitting bucket
// nearest in rate (on a grid a percent apart), and of that rate the
// nearest in size, unless that rate is within a tenth of the reading's:
// the tangent measures each part of a stretch to the refusal, a part of a
// call longer than the replay does, and is that close. None fits (a fixed
// window, a server that changed its limit): the reading stands.
//
// Times are whole microseconds of the pacer's clock. Thread-safety: none;
// its owner holds its own lock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ratchet::limit {

struct BucketShape {
  double rate = 0;   // calls per microsecond
  double burst = 0;  // calls
};

class BucketFit {
 public:
  // A call started at `started_us` was answered: admitted or refused.
  void answered(std::int64_t started_us, bool admitted);

  // `reading` when it fits every answer, else the nearest bucket that does
  // (see above); `reading` too when none does.
  BucketShape fit(const BucketShape& reading) const;
  bool fits(const BucketShape& shape) const;

  // With no reading: the buckets that fit every answer span rates from one
  // to another no more than kMostSpread apart (a small bucket's answers
  // bound its rate both ways, where no tangent reads it): the rate a
  // quarter of the way from the fastest to the slowest, in ratio, and the
  // least size that fits there. Every call after it pays for a rate read
  // low, a refusal costs one pause: a refusal there cuts the span by a
  // quarter the next time. Nothing when the span is wider, or none fits.
  std::optional<BucketShape> midst() const;

  // The fastest rate, on the grid from `rate` up (within kReach of it),
  // that some bucket fitting every answer exactly (no jitter allowed)
  // refills at, with no more than kMostGap grid steps in a row between it
  // and the first from `rate` up that fits none: a rate read from refusals may be paced faster
  // up to it, where no answer says the server is slower. Nothing when no
  // rate there fits.
  std::optional<double> fastest_from(double rate) const;
  static constexpr int kMostGap = 8;

  // The slowest bucket at `least_rate` or faster (within kReach of it) that
  // fits every answer, of the sizes that fit there the nearest `burst`;
  // nothing when none does.
  std::optional<BucketShape> slowest_from(double least_rate, double burst) const;
  static constexpr double kMostSpread = 16;
  static constexpr std::int64_t kMaxMidstBurst = 64;

  // How far a call's arrival may lie from its start's place among the others.
  static constexpr std::int64_t kJitterUs = 3'000;
  // Answers kept: past this the oldest half goes, at a stretch's start after
  // a pause of at least kRefillUs, where a bucket that refills within it is full.
  static constexpr std::size_t kMaxAnswers = 4096;
  static constexpr std::int64_t kRefillUs = 900'000;
  // The rates tried: a grid a percent apart, within kReach of the reading's
  // either way, and between these spacings.
  static constexpr double kGridStep = 1.01;
  static constexpr double kReach = 8;
  // A fitting rate this close to the reading's leaves the reading as it is.
  static constexpr double kKeepWithin = 1.1;
  static constexpr std::int64_t kFastestUs = 500;
  static constexpr std::int64_t kSlowestUs = 10'000'000;
  // Sizes tried: up to the most calls admitted from the first call on
  // before the first refusal (the bucket was full at the first), plus one.
  static constexpr std::int64_t kMaxBurst = 1024;

 private:
  struct Answer {
    std::int64_t started_us;
    bool admitted;
  };
  bool replays(double interval_us, double burst, double jitter_us) const;
  // Some size fits at this spacing, with no jitter: the least that admits every admitted
  // call (admitted calls move the replay alike whatever the size) refuses
  // every refused one best.
  bool fits_some(double interval_us) const;
  // Of the sizes up to `max_burst` that fit at this spacing, the nearest `burst`.
  std::optional<std::int64_t> nearest_size(double interval_us, double burst, std::int64_t max_burst) const;
  void trim();

  std::vector<Answer> answers_;      // by start
  std::int64_t first_admitted_ = 0;  // started before the first refusal
  std::int64_t first_refused_us_ = 0;
  bool refused_yet_ = false;
};

}  // namespace ratchet::limit
