// The exact sliding-window rule on a sorted log of call starts: at most `rate`
// starts in ANY interval [s, s + per) of length `per`, whatever its alignment.
//
// Equivalently, any rate + 1 consecutive starts span at least `per`. Future
// entries in the log are reservations, so the same rule covers them. These
// are pure functions over any random-access sorted sequence of microsecond
// times; the in-memory and the database-scope limiters share them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ratchet::limit {

// Zero when `units` starts at t (1 <= units <= rate) keep every interval of
// length `per` within `rate`; otherwise a time > t before which they cannot
// fit (a lower bound for the search: the entries of the crowded group must
// be passed first). A call costing u units is u entries at one time.
template <typename Seq>
std::int64_t sliding_check(const Seq& log, std::int64_t rate, std::int64_t per, std::int64_t t,
                           std::int64_t units = 1) {
  const auto m = static_cast<std::int64_t>(log.size());
  if (m + units <= rate) return 0;
  const auto p = static_cast<std::int64_t>(std::upper_bound(log.begin(), log.end(), t) - log.begin());
  // The log with `units` copies of t inserted at index p; only groups of
  // rate + 1 that hold one of them change.
  auto merged = [&](std::int64_t i) -> std::int64_t {
    if (i < p) return log[static_cast<std::size_t>(i)];
    if (i < p + units) return t;
    return log[static_cast<std::size_t>(i - units)];
  };
  const std::int64_t first = std::max<std::int64_t>(0, p - rate);
  const std::int64_t last = std::min<std::int64_t>(p + units - 1, m + units - 1 - rate);
  std::int64_t bound = 0;
  for (std::int64_t q = first; q <= last; ++q) {
    if (merged(q + rate) - merged(q) < per) {
      // A copy of t last in the group: t must wait for the group's first to
      // leave the window. Otherwise every time up to the group's last entry
      // stays inside it.
      bound = std::max(bound, q + rate < p + units ? merged(q) + per : std::max(t + 1, merged(q + rate)));
    }
  }
  return bound;
}

template <typename Seq>
bool sliding_fits(const Seq& log, std::int64_t rate, std::int64_t per, std::int64_t t,
                  std::int64_t units = 1) {
  return sliding_check(log, rate, per, t, units) == 0;
}

// The earliest time >= t at which `units` starts (1 <= units <= rate) fit. Feasible times begin at t or
// where an entry leaves the window (entry + per), so only those are tried,
// skipping past crowded groups. The search for a gap between reservations is
// bounded: past `max_probes` candidates the answer is the first time after
// every entry, which always fits.
template <typename Seq>
std::int64_t sliding_earliest(const Seq& log, std::int64_t rate, std::int64_t per, std::int64_t t,
                              std::int64_t units = 1, int max_probes = 64) {
  std::int64_t bound = sliding_check(log, rate, per, t, units);
  if (bound == 0) return t;
  const auto m = log.size();
  // After every entry and `per` after the (rate - units + 1)-th latest: the
  // group of those entries plus the new ones then spans at least `per`.
  std::int64_t tail = std::max(t, log[m - 1]);
  const std::int64_t keep = rate - units + 1;
  if (static_cast<std::int64_t>(m) >= keep) {
    tail = std::max(tail, log[m - static_cast<std::size_t>(keep)] + per);
  }
  for (int probes = 0; probes < max_probes; ++probes) {
    auto it = std::lower_bound(log.begin(), log.end(), bound - per);
    if (it == log.end()) break;
    const std::int64_t c = std::max(*it + per, bound);
    if (c >= tail) break;
    const std::int64_t next = sliding_check(log, rate, per, c, units);
    if (next == 0) return c;
    bound = std::max(next, c + 1);
  }
  return tail;
}

}  // namespace ratchet::limit
