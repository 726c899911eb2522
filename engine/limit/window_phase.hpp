// Where a fixed-window server's windows begin, learned to within a few
// milliseconds from the replies of the calls it counted.
//
// A server that renews its quota in fixed windows says when only in whole
// seconds (X-RateLimit-Reset, RateLimit's reset, both read against a Date
// in whole seconds), so a client that waits for the reset it was told
// loses up to two seconds at every window, and one that goes sooner is
// refused. The window's length is known exactly (a policy's `w`, or the
// step between two resets written as Unix times), so every boundary is one
// phase plus whole windows, and the phase is what is learned: an interval
// (lo, hi] holding one boundary, in the times calls start. A call started
// after hi + k windows reaches the server after that boundary: hi is taken
// from the starts of calls, each moved on by how much longer than the
// quickest reply its reply took (see opened), so a call slowed on its way
// does not make the boundary look early.
//   - The first call the server counted in its window, started at s, puts
//     the boundary before it at or before s, when the window before had a
//     call started well inside it (or the window may have been idle and
//     the boundary long past).
//   - Any other call, started at s after the latest window's first, was
//     counted before the next boundary: it is after s.
//   - A refused call started past hi (whose window the phase said was new)
//     means the phase is wrong: it is forgotten and learned again.
// Only calls started inside the interval narrow it. The pacer sends a
// window's last units one at a time (the probes) at its middle, each
// halving it, until it is narrower than kResolution.
// Before the phase is known, the end of the current window is probed
// between the latest call counted in it and the end its reset states, the
// probes spread evenly from the early side; the first window's end found
// so starts the phase.
//
// Not thread-safe: the pacer calls it under its own lock.
#pragma once

#include <cstdint>
#include <utility>

#include "limit/time_queue.hpp"

namespace ratchet::limit {

class WindowPhase {
 public:
  // Narrow enough: no more probes.
  static constexpr std::int64_t kResolution = 12'000;

  // The server's window, exactly. A different one forgets the phase.
  void set_window(std::int64_t window_us);
  std::int64_t window() const { return window_us_; }
  bool known() const { return known_; }
  std::int64_t width() const { return hi_ - lo_; }

  void started(std::int64_t at_us);
  // A reply to a call started at `started_us` came at `replied_us`.
  void replied(std::int64_t started_us, std::int64_t replied_us);
  // ... and it was the first call its window counted.
  void opened(std::int64_t started_us, std::int64_t replied_us);
  // ... and it was not the first, nor refused.
  void counted(std::int64_t started_us);
  // ... and it was refused: its window was spent.
  void refused(std::int64_t started_us);
  // A reply to a call started at `started_us` said its window ends by
  // `end_us` (a reset rounded up to whole seconds is never early).
  void ends_by(std::int64_t started_us, std::int64_t end_us);

  // The latest the window of a call started at `started_us` can end.
  std::int64_t end_after(std::int64_t started_us) const;
  // How long a span the boundary at or before `end_us` (an end_after, or
  // the end a reset states) may still lie in.
  std::int64_t doubt(std::int64_t end_us) const;
  // When to send the probe for that boundary, or zero when it is known
  // closely enough. Before the phase is known, `probes` (this one
  // included) scan the span from its start, evenly: each one counted in the
  // old window moves the span's start on, and the first in the new window
  // ends the search (halving the span would send the first probe to its
  // middle, however early the boundary).
  std::int64_t probe_before(std::int64_t end_us, std::int64_t probes = 1) const;

  // The start of a call answered at `replied_us`, moved on by how much
  // longer than the quickest reply seen its reply took: the latest it may
  // have been counted, less the quickest way there.
  std::int64_t corrected(std::int64_t started_us, std::int64_t replied_us) const;

  // Every field, in one order, to a PackWriter or PackReader
  // (limit/packed_state.hpp).
  template <typename Self, typename Io>
  static void each_field(Self& self, Io& io) {
    io.number(self.window_us_);
    io.flag(self.known_);
    io.time(self.lo_);
    io.time(self.hi_);
    io.time(self.opener_us_);
    io.time(self.pending_lo_);
    io.number(self.min_rtt_us_);
    io.times(self.starts_);
  }

 private:
  // The boundary interval's index for a start at `t`, and how far into it.
  std::int64_t index(std::int64_t t) const;
  // The part of the boundary interval at or before `end_us` that lies
  // before it: (first, second].
  std::pair<std::int64_t, std::int64_t> span_before(std::int64_t end_us) const;

  std::int64_t window_us_ = 0;
  bool known_ = false;
  std::int64_t lo_ = 0;  // a boundary lies in (lo_, hi_]
  std::int64_t hi_ = 0;
  std::int64_t opener_us_ = 0;  // start of the latest first call of a window
  // Not known yet: the latest start counted in the current window, its
  // first call's or a later one's (zero: none).
  std::int64_t pending_lo_ = 0;
  std::int64_t min_rtt_us_ = -1;
  TimeQueue<std::int64_t> starts_;  // within the last two windows
};

}  // namespace ratchet::limit
