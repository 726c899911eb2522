// Builds the limiter a LimitSpec declares: its algorithm in its scope.
//
// The integrator keeps one limiter per declared limit and shares it (by
// shared_ptr) between every operation the limit applies to; database-scope
// limits need a connection factory and a key naming the limit.
// Thread-safety: a free function; the limiters it returns are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "config/spec.hpp"
#include "limit/database_limiter.hpp"
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

// A key for a database-scope limit that changes when its shape changes,
// e.g. "imdb/get_rating/10per86400000000us/sliding".
std::string limiter_key(const std::string& owner, const config::LimitSpec& spec);

}  // namespace ratchet::limit
