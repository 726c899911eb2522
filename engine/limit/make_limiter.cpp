#include "limit/make_limiter.hpp"

#include <algorithm>

#include "limit/fixed_window.hpp"
#include "limit/limit_bounds.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"

namespace ratchet::limit {
namespace {

// Database-scope limits keep the same margin, and the same slack between
// granting and checking, as in-process ones (see make_limiter): the server
// counts the calls of every process with the same jitter.
DatabaseLimiterOptions database_options(const config::LimitSpec& spec, std::shared_ptr<const Clock> clock) {
  DatabaseLimiterOptions options;
  options.clock = std::move(clock);
  options.margin_us = spec.algorithm == config::LimitAlgorithm::kTokenBucket
                          ? bucket_margin_us(spec.rate, spec.per.count(), spec.burst.value_or(1))
                          : jitter_margin_us(spec.per.count());
  options.burst_guard_us = kBurstGuardUs;
  if (spec.algorithm == config::LimitAlgorithm::kSlidingWindow) {
    options.grant_slack_us = grant_slack_us(spec.per.count());
  } else if (spec.algorithm == config::LimitAlgorithm::kTokenBucket) {
    options.check_per_us = bucket_check_per_us(spec.rate, spec.per.count(), spec.burst.value_or(1));
  }
  return options;
}

}  // namespace

Result<std::shared_ptr<Limiter>> make_database_limiter(const config::LimitSpec& spec, const std::string& key,
                                                       std::shared_ptr<SharedLimiterTables> tables,
                                                       std::shared_ptr<const Clock> clock) {
  auto db = DatabaseLimiter::open(spec, key, std::move(tables), database_options(spec, std::move(clock)));
  if (!db) return fail(db.error());
  return std::shared_ptr<Limiter>(std::move(*db));
}

std::shared_ptr<KeyedLimiters> make_keyed_database_limiters(const config::LimitSpec& spec,
                                                            const std::string& name,
                                                            std::shared_ptr<SharedLimiterTables> tables,
                                                            std::shared_ptr<const Clock> clock,
                                                            std::int64_t sweep_every_us) {
  constexpr std::int64_t kTidyEveryUs = 60'000'000;
  constexpr std::int64_t kKeysATidy = 256;
  const std::int64_t window = spec.per.count() + jitter_margin_us(spec.per.count());
  const std::int64_t keep = std::max(kIdleKeyRowsKeptUs, 2 * window);
  const std::string prefix = name + "#";
  return std::make_shared<KeyedLimiters>(
      [spec, prefix, tables, clock](const std::string& key, std::int64_t) {
        return make_database_limiter(spec, prefix + key, tables, clock);
      },
      sweep_every_us,
      [tables, prefix, keep](std::int64_t now_us) {
        return forget_idle_keys(*tables, prefix, now_us - keep, kKeysATidy);
      },
      kTidyEveryUs);
}

Result<std::shared_ptr<Limiter>> make_limiter(const config::LimitSpec& spec, const std::string& key,
                                              const ConnectionFactory& connect,
                                              std::shared_ptr<const Clock> clock) {
  if (auto why = limit_out_of_bounds(spec))
    return fail(Error::invalid_argument("limit " + key + ": " + *why));
  if (spec.scope == config::LimitScope::kDatabase) {
    auto db = DatabaseLimiter::open(spec, key, connect, database_options(spec, std::move(clock)));
    if (!db) return fail(db.error());
    return std::shared_ptr<Limiter>(std::move(*db));
  }
  // Limits are kept as counted at the server, where calls arrive with the
  // jitter of getting there: a call that is a little late arrives closer to
  // the next one than they started. Calls started a hair under the declared
  // pace build the slack that absorbs it. A burst is held back a little too:
  // the server's bucket starts at the first call to arrive, and the first
  // calls are the slowest to get there (each opens a connection), so the
  // calls after a full burst would reach a bucket that has refilled less
  // than ours. Fixed windows count epoch-aligned windows like most servers
  // and keep the exact figure, starting nothing in the margin before a
  // window's end (a call then could reach the server in the next window).
  //
  // Slots are granted a little slower still than the calls that start are
  // checked (grant_slack_us): a call that starts late then still fits where
  // its slot was, and does not push back the slots granted after it.
  const std::int64_t per_us = spec.per.count() + jitter_margin_us(spec.per.count());
  switch (spec.algorithm) {
    case config::LimitAlgorithm::kSlidingWindow:
      return std::make_shared<SlidingWindowLimiter>(spec.rate, per_us,
                                                    per_us + grant_slack_us(spec.per.count()));
    case config::LimitAlgorithm::kTokenBucket: {
      const std::int64_t burst = spec.burst.value_or(1);
      return std::make_shared<TokenBucketLimiter>(
          spec.rate, spec.per.count() + bucket_margin_us(spec.rate, spec.per.count(), burst), burst,
          kBurstGuardUs, bucket_check_per_us(spec.rate, spec.per.count(), burst));
    }
    case config::LimitAlgorithm::kFixedWindow:
      return std::make_shared<FixedWindowLimiter>(spec.rate, spec.per.count(),
                                                  std::min(kJitterFloorUs, spec.per.count() / 10));
  }
  return fail(Error::internal("limit " + key + ": unknown algorithm"));
}

std::string limiter_key(const std::string& owner, const config::LimitSpec& spec) {
  const char* algo = spec.algorithm == config::LimitAlgorithm::kSlidingWindow ? "sliding"
                     : spec.algorithm == config::LimitAlgorithm::kFixedWindow ? "fixed"
                                                                              : "bucket";
  std::string key =
      owner + "/" + std::to_string(spec.rate) + "per" + std::to_string(spec.per.count()) + "us/" + algo;
  if (spec.burst) key += "/burst" + std::to_string(*spec.burst);
  if (spec.key) key += "/key=" + *spec.key;
  return key;
}

std::string database_limit_name(const std::string& owner, const config::LimitSpec& spec,
                                const std::vector<config::LimitSpec>& specs) {
  if (spec.algorithm != config::LimitAlgorithm::kSlidingWindow) return limiter_key(owner, spec);
  for (const auto& other : specs) {
    if (&other != &spec && other.scope == config::LimitScope::kDatabase &&
        other.algorithm == config::LimitAlgorithm::kSlidingWindow && other.per == spec.per &&
        other.key == spec.key) {
      return limiter_key(owner, spec);
    }
  }
  std::string name = owner + "/per" + std::to_string(spec.per.count()) + "us/sliding";
  if (spec.key) name += "/key=" + *spec.key;
  return name;
}

}  // namespace ratchet::limit
