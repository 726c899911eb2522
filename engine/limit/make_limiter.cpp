#include "limit/make_limiter.hpp"

#include "limit/fixed_window.hpp"
#include "limit/sliding_window.hpp"
#include "limit/token_bucket.hpp"

namespace ratchet::limit {

Result<std::shared_ptr<Limiter>> make_limiter(const config::LimitSpec& spec, const std::string& key,
                                              const ConnectionFactory& connect) {
  if (spec.rate < 1 || spec.per.count() < 1 || (spec.burst && *spec.burst < 1)) {
    return fail(Error::invalid_argument(
        "limit " + key + ": rate, per and burst must be positive (rate=" + std::to_string(spec.rate) + ")"));
  }
  if (spec.scope == config::LimitScope::kDatabase) {
    auto db = DatabaseLimiter::open(spec, key, connect);
    if (!db) return fail(db.error());
    return std::shared_ptr<Limiter>(std::move(*db));
  }
  switch (spec.algorithm) {
    case config::LimitAlgorithm::kSlidingWindow:
      return std::make_shared<SlidingWindowLimiter>(spec.rate, spec.per.count());
    case config::LimitAlgorithm::kTokenBucket:
      return std::make_shared<TokenBucketLimiter>(spec.rate, spec.per.count(), spec.burst.value_or(1));
    case config::LimitAlgorithm::kFixedWindow:
      return std::make_shared<FixedWindowLimiter>(spec.rate, spec.per.count());
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
  return key;
}

}  // namespace ratchet::limit
