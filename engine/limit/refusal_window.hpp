// Reads a fixed window from a server that only refuses: its 429 carries a
// Retry-After at most, never the quota, what remains or when the window
// resets. Given the window's length W (from the pauses asked for), it reads
// the window's phase and its quota Q from the times calls were admitted and
// the times the first call of each stretch was refused.
//
// A fixed window counts the calls that arrive in [b, b + W) and refuses
// each one past Q. The client knows starts, not arrivals; a steady latency
// moves every arrival alike, so the phase read is the boundary among the
// starts. A candidate phase fits when
//   - every refusal saw the same count of admitted starts in its window
//     before it (within kSlack: calls started together arrive in any
//     order), and
//   - no window held more than that count (plus kSlack), and
//   - the refusals' windows filled over spans (from a window's first
//     start to its refusal) apart in length by what a bucket of the
//     window's rate takes to admit kSpreadCalls more (kMinSpreadUs at the
//     least): a token bucket admits more the longer it is sent to, a
//     window its quota however long it takes; stretches alike fit both.
// Dense starts around a boundary pin it: moving the phase past one of them
// changes one refusal's count and not another's, or fills a window over
// the quota. A window is read when the phases that fit lie on one arc no
// wider than W / kMaxArcShare; the quota is then the least count on it (the
// boundary's latest phase: counted from later, a refusal saw fewer). A
// boundary that only ever fell in a pause (each stretch filled its window
// before the window's end) is not pinned: a wider arc, up to 3/4 of the
// window, is read when every phase on it counts the same. A token bucket,
// or a window of another length, fits no phase, or fits phases all round:
// nothing is read.
//
// Times are whole microseconds of the pacer's clock; the caller supplies them.
// Thread-safety: none; its owner (AdaptivePacer) holds its own lock.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "limit/time_queue.hpp"

namespace ratchet::limit {

struct WindowReading {
  std::int64_t quota = 0;
  // The boundary, among the starts, lies in [earliest_us, latest_us] modulo
  // the window's length (latest_us may exceed the window when the arc wraps).
  std::int64_t earliest_us = 0;
  std::int64_t latest_us = 0;
};

class RefusalWindow {
 public:
  // A call started at `started_us` was admitted (any answer but a refusal:
  // the server counted it).
  void admitted(std::int64_t started_us);
  // The first call of a stretch to be refused started at `started_us`.
  void refused(std::int64_t started_us);

  // A window read was refused under: what came before `from_us` is of a
  // window that no longer holds, and is forgotten with every refusal.
  void forget_before(std::int64_t from_us);

  // The admitted starts from `from_us` on, in order.
  std::vector<std::int64_t> starts_from(std::int64_t from_us) const;

  // The window of length `window_us` that fits what was seen, if one does,
  // with at least `refusals` (>= 2) refusals in windows known whole. Two
  // refusals fit a bucket too: whatever the bucket, some quota and phase
  // make their two counts equal. Three tell them apart, or two once the
  // server is known to be no bucket (refusal_estimator.hpp).
  std::optional<WindowReading> read(std::int64_t window_us, int refusals = 3) const;

  static constexpr std::int64_t kSlack = 1;
  static constexpr std::int64_t kMinSpreadUs = 50'000;
  static constexpr std::int64_t kSpreadCalls = 3;
  static constexpr std::int64_t kStepUs = 1'000;       // phases tried, this far apart
  static constexpr std::int64_t kMaxArcShare = 10;     // of the window
  static constexpr std::size_t kMaxRefusals = 8;       // the latest are compared
  static constexpr std::int64_t kSpanUs = 20'000'000;  // starts kept this long
  static constexpr std::size_t kMaxStarts = 8192;

 private:
  TimeQueue<std::int64_t> starts_;  // admitted, sorted
  TimeQueue<std::int64_t> refusals_;
  // Every start from here on is known: from the first call, or from the
  // oldest start kept.
  std::int64_t seen_from_us_ = INT64_MIN;
  std::int64_t latest_us_ = 0;  // the latest start or refusal
};

}  // namespace ratchet::limit
