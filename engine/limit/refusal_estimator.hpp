// Learns the rate of a server that only refuses: a token bucket that answers
// 429 with at most a Retry-After, and never says its rate or what remains.
//
// Each refusal ends a stretch that began at the end of the previous pause
// (or at the first call), when the bucket was full. Every part of a stretch
// that ends at its refusal, from one of its admitted starts on, is a point
// (L, A): its length and the calls it admitted. No interval of length L
// admits more than B + r L, so every point lies on or under that line; and
// the part from the last moment the bucket was full (after which it
// drained to the refusal) admitted B + r L, so each stretch touches it. A
// stretch that sent slower than r for a while (a slow start, the first
// call alone) let the bucket overflow then, and its longer parts fall
// under the line; parts inside the drain fall under it too.
//
// So the line is a common upper tangent of two stretches' points: an edge
// of the upper convex hull of both that joins a point of each, at least
// kMinStretchGapUs apart in length (closer ones leave the rate to the
// jitter of a few arrivals), that gives the bucket a call at least (a line
// through nothing at length zero is the client's own pace: the calls in
// flight sent as fast as they come back). Its slope is the rate and its intercept the
// bucket's size. A stretch compared with a shorter one is compared with
// the shortest so far (the reference), whose drain is the least mixed
// with overflow. A reading that contradicts an answer the server gave is
// moved to the nearest bucket that does not (bucket_fit.hpp): a small
// bucket touches no two points far enough apart.
//
// Times are whole microseconds of the pacer's clock; the caller supplies them.
// Thread-safety: none; its owner (AdaptivePacer) holds its own lock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "limit/bucket_fit.hpp"

namespace ratchet::limit {

struct RefusalReading {
  std::optional<double> rate;  // calls per microsecond, once two stretches tell it
  // With the rate, when it is a bucket's: its size (at least zero).
  std::optional<double> burst;
  // With the rate: the fastest the server may refill at, as far as every
  // answer it gave says (bucket_fit.hpp). The pace may rise towards it.
  std::optional<double> fastest;
  // Some stretch admitted more over it and its pause than a bucket of the
  // rate read could: the server is no bucket, and no rate is read from it.
  bool not_a_bucket = false;
  std::int64_t admitted = 0;   // in the stretch the refusal ended
  std::int64_t length_us = 0;  // of that stretch
  // Taken again with a call of that stretch answered after its refusal (a
  // proxy refuses at once and forwards the rest): `admitted` counts it.
  bool late = false;
};

class RefusalEstimator {
 public:
  // A call started at `started_us` was admitted. A call started within the
  // last stretch that ended (its reply came after the refusal's) counts
  // there, and the reading of that refusal is taken again with it and
  // returned (`late`, with no rate when there was none to take again);
  // calls started in a pause (in flight at a refusal) do not count.
  std::optional<RefusalReading> admitted(std::int64_t started_us);

  // A call started at `started_us` was refused; the next stretch begins at
  // `resume_us` (the end of the pause). Nothing when the refused call started
  // before the current stretch: it reports the overload already counted.
  std::optional<RefusalReading> refused(std::int64_t started_us, std::int64_t resume_us);

  // Shortest gap in length between the two stretches' points compared.
  static constexpr std::int64_t kMinStretchGapUs = 200'000;
  // Admitted starts remembered per stretch (a long stretch keeps its latest).
  static constexpr std::size_t kMaxStarts = 4096;
  // How far above a hull edge a point between its ends may lie, in calls:
  // near-collinear points of one drain, moved by the jitter of arrivals.
  static constexpr double kTolerance = 0.25;
  // The least size a tangent may give a bucket, in calls (see tangent()).
  static constexpr double kMinBurst = 0.5;

 private:
  struct Stretch {
    std::int64_t start_us = 0;
    std::int64_t refused_us = 0;
    std::int64_t admitted = 0;
    std::vector<std::int64_t> starts;  // of its admitted calls (the latest kMaxStarts)
  };
  struct Line {
    double rate = 0;   // calls per microsecond
    double burst = 0;  // calls
  };
  // A stretch and the pause after it, for the check that the server is a bucket.
  struct Cycle {
    std::int64_t admitted = 0;
    std::int64_t length_us = 0;
  };
  static void add_start(Stretch& stretch, std::int64_t started_us);
  RefusalReading read(const Stretch& reference, const Stretch& s);
  static std::optional<Line> tangent(const Stretch& a, const Stretch& b);
  static std::optional<Line> lower_bound(const Stretch& ref, const Stretch& s);

  bool begun_ = false;
  Stretch current_;
  std::optional<Stretch> reference_;  // the shortest refused stretch so far
  std::optional<Stretch> ended_;      // the last stretch a refusal ended
  std::optional<Stretch> compared_;   // the reference it was read against
  std::optional<Cycle> cycle_;        // the stretch before it, and its pause
  bool not_a_bucket_ = false;
  // Every answer, to check a reading against (bucket_fit.hpp).
  BucketFit fit_;
};

}  // namespace ratchet::limit
