// Builds the limiter a LimitSpec declares: its algorithm in its scope.
//
// The integrator keeps one limiter per declared limit and shares it (by
// shared_ptr) between every operation the limit applies to; database-scope
// limits need a connection factory and a key naming the limit.
// Thread-safety: a free function; the limiters it returns are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/spec.hpp"
#include "limit/database_limiter.hpp"
#include "limit/keyed_limiters.hpp"
#include "limit/limiter.hpp"

namespace ratchet::limit {

// Sliding windows and token buckets stretch their period by a margin that
// absorbs the jitter of getting to the server (see make_limiter): 1 % of the
// period, and at least kJitterFloorUs (a loaded machine delays a call's bytes
// by that much), but never more than a tenth of a short period.
inline constexpr std::int64_t kJitterMarginDivisor = 100;
inline constexpr std::int64_t kJitterFloorUs = 50'000;
constexpr std::int64_t jitter_margin_us(std::int64_t per_us) {
  const std::int64_t floor = per_us / 10 < kJitterFloorUs ? per_us / 10 : kJitterFloorUs;
  const std::int64_t share = per_us / kJitterMarginDivisor;
  return share > floor ? share : floor;
}
// ...and hold a burst back by this long (a token bucket's burst, minus the
// tokens that refill in this time, goes at once): the server's bucket starts
// refilling when the burst's last call arrives, up to the jitter floor after
// it started, so the calls after the burst are held back by as much.
inline constexpr std::int64_t kBurstGuardUs = kJitterFloorUs;

// The margin of a token bucket. The guard takes the whole burst but one when
// it spans the burst's intervals: starts then go strictly spaced, and calls
// arriving up to kJitterFloorUs apart from when they started could bunch
// into burst + 1 arrivals within one interval at the server. Its burst + 1
// calls must then start at least an interval plus that jitter apart, so the
// period stretches to rate * (per / rate + jitter) / burst when that is more.
// A burst of 1 keeps the plain margin: no margin short of the jitter on
// every interval holds strict spacing at the server.
constexpr std::int64_t bucket_margin_us(std::int64_t rate, std::int64_t per_us, std::int64_t burst) {
  const std::int64_t margin = jitter_margin_us(per_us);
  if (burst < 2 || rate < 1) return margin;
  const std::int64_t spacing = (per_us + margin) / rate + 1;
  // (burst - 1) * spacing >= the guard: part of the burst stays, and it
  // absorbs the jitter (checked by division, burst may be huge).
  if (spacing >= kBurstGuardUs || burst - 1 >= kBurstGuardUs / spacing + 1) return margin;
  if ((burst - 1) * spacing >= kBurstGuardUs) return margin;
  const std::int64_t declared = per_us / rate + 1;
  const std::int64_t needed = (declared + kJitterFloorUs) / burst + 1;
  if (needed <= spacing) return margin;
  const std::int64_t stretched = needed * rate - per_us;
  return stretched > margin ? stretched : margin;
}

// The slack between granting a slot and checking a start. A sliding window
// grants its slots in a window longer by half the jitter margin than the one
// it checks starts in: a call that starts up to that late still fits, and a
// later delay heals by as much each window instead of lasting.
constexpr std::int64_t grant_slack_us(std::int64_t per_us) { return jitter_margin_us(per_us) / 2; }

// A token bucket checks starts against the declared rate when the burst
// guard leaves part of the burst (per / rate * (burst - 1) >= the guard):
// starts kept to a bucket of the declared rate whose tolerance is shorter by
// the guard reach a server's bucket of that rate, each up to the guard late,
// within its tolerance. Its slots keep the margin, which makes the slack for
// a late start. Otherwise (0) starts are checked as the slots are granted.
constexpr std::int64_t bucket_check_per_us(std::int64_t rate, std::int64_t per_us, std::int64_t burst) {
  if (burst < 2 || rate < 1) return 0;
  const std::int64_t interval = per_us / rate + (per_us % rate != 0 ? 1 : 0);
  if (interval >= kBurstGuardUs) return per_us;
  return burst - 1 >= (kBurstGuardUs + interval - 1) / interval ? per_us : 0;
}

// A token bucket without a declared burst gets a burst of 1 (strict spacing
// per/rate), which also keeps the sliding-window rule. `connect` may be empty
// for process-scope limits; database-scope limits read `clock` (when given)
// at each start. Fails with kInvalidArgument on a spec that the loader
// should have refused (rate, per or burst not positive).
[[nodiscard]] Result<std::shared_ptr<Limiter>> make_limiter(const config::LimitSpec& spec,
                                                            const std::string& key,
                                                            const ConnectionFactory& connect = {},
                                                            std::shared_ptr<const Clock> clock = nullptr);

// The same for a database-scope limit on a connection shared with others
// (the keys of a keyed limit).
[[nodiscard]] Result<std::shared_ptr<Limiter>> make_database_limiter(
    const config::LimitSpec& spec, const std::string& key, std::shared_ptr<SharedLimiterTables> tables,
    std::shared_ptr<const Clock> clock = nullptr);

// A database-scope keyed limit: one limiter a key, each keeping its state
// in the store under "<name>#<key>". Dropped from memory once idle
// (`sweep_every_us`), a key's rows stay in the store while anything in them
// still counts; a key unused for kIdleKeyRowsKeptUs (or twice its window,
// when longer) has its rows removed by a decision on any key of the limit,
// a batch at most once a minute: a limit over ever-new keys (one per user,
// per order) keeps the rows of the keys used lately, not of every key it
// ever met.
inline constexpr std::int64_t kIdleKeyRowsKeptUs = 600'000'000;
[[nodiscard]] std::shared_ptr<KeyedLimiters> make_keyed_database_limiters(
    const config::LimitSpec& spec, const std::string& name, std::shared_ptr<SharedLimiterTables> tables,
    std::shared_ptr<const Clock> clock, std::int64_t sweep_every_us);

// A key for a limit that changes when its shape changes,
// e.g. "imdb/get_rating/10per86400000000us/sliding".
std::string limiter_key(const std::string& owner, const config::LimitSpec& spec);

// The name a database-scope limit's count is kept under. A sliding window's
// count is a log of calls that any rate can be checked against, so its name
// leaves the rate out ("imdb/per1000000us/sliding"): a reload or restart
// that changes only the rate, and processes still running the old rate
// beside ones running the new, count the same calls, each against its own
// rate. Another database-scope sliding window of the owner over the same
// window (and key) would record every call into that log too, so then the
// rate stays in the name. A token bucket's or a fixed window's state is
// kept at its rate: their names are limiter_key(). `specs`: all the
// owner's limits, `spec` one of them.
std::string database_limit_name(const std::string& owner, const config::LimitSpec& spec,
                                const std::vector<config::LimitSpec>& specs);

}  // namespace ratchet::limit
