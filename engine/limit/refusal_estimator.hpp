// Learns the rate of a server that only refuses: a token bucket that answers
// 429 with at most a Retry-After, and never says its rate or what remains.
//
// Each refusal ends a stretch that began at the end of the previous pause
// (or at the first call), when the bucket was full. A stretch that kept the
// bucket draining admits its size plus its rate times its length,
// k = B + r T, so two stretches of different lengths give r. A stretch that
// sent slower than r for a while lets the bucket fill (and overflow) again
// and admits less; its part from the last moment the bucket was full still
// admits B + r T. That moment is unknown, but every part that ends at the
// refusal gives a rate the server allows at least, and the part from that
// moment gives the rate itself: the estimate is the largest of them.
//
// Times are whole microseconds of the pacer's clock; the caller supplies them.
// Thread-safety: none; its owner (AdaptivePacer) holds its own lock.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace ratchet::limit {

struct RefusalReading {
  std::optional<double> rate;  // calls per microsecond, once two stretches tell it
  // With the rate, when it is a bucket's: its size, B = k - r T of the
  // shortest stretch (the least sensitive to an error in r). At least zero.
  std::optional<double> burst;
  // Some stretch admitted more over it and its pause than a bucket of the
  // rate read could: the server is no bucket, and no rate is read from it.
  bool not_a_bucket = false;
  std::int64_t admitted = 0;   // in the stretch the refusal ended
  std::int64_t length_us = 0;  // of that stretch
};

class RefusalEstimator {
 public:
  // A call started at `started_us` was admitted. A call started within the
  // last stretch that ended (its reply came after the refusal's) counts
  // there; calls started in a pause (in flight at a refusal) do not count.
  void admitted(std::int64_t started_us);

  // A call started at `started_us` was refused; the next stretch begins at
  // `resume_us` (the end of the pause). Nothing when the refused call started
  // before the current stretch: it reports the overload already counted.
  std::optional<RefusalReading> refused(std::int64_t started_us, std::int64_t resume_us);

  // Shortest gap in length between the two stretches (or parts) compared:
  // closer ones leave the rate to the jitter of a few arrivals.
  static constexpr std::int64_t kMinStretchGapUs = 200'000;
  // Admitted starts remembered per stretch (a long stretch keeps its latest).
  static constexpr std::size_t kMaxStarts = 4096;

 private:
  struct Stretch {
    std::int64_t length_us = 0;
    std::int64_t admitted = 0;
  };
  struct Ended {
    std::int64_t start_us = 0;
    std::int64_t refused_us = 0;
    std::int64_t admitted = 0;
    bool is_reference = false;
  };
  std::optional<double> estimate(std::int64_t refused_us) const;

  bool begun_ = false;
  std::int64_t stretch_start_us_ = 0;
  std::int64_t admitted_ = 0;         // in the current stretch
  std::deque<std::int64_t> starts_;   // of the admitted calls of the current stretch, in order seen
  std::optional<Stretch> reference_;  // the shortest refused stretch so far: its B + r T is the best
  std::optional<Ended> ended_;        // the last stretch a refusal ended
  bool not_a_bucket_ = false;
};

}  // namespace ratchet::limit
