#include "limit/token_bucket.hpp"

#include <algorithm>
#include <string>

#include "common/duration.hpp"

namespace ratchet::limit {

TokenBucketLimiter::TokenBucketLimiter(std::int64_t rate, std::int64_t per_us, std::int64_t burst)
    : rate_(rate), per_(per_us), burst_(burst), gcra_(Gcra::make(rate, per_us, burst)) {}

Result<std::int64_t> TokenBucketLimiter::earliest(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  return gcra_.earliest(tat_, std::max(now_us, t_us));
}

Result<Slot> TokenBucketLimiter::reserve(std::int64_t now_us, std::int64_t t_us) {
  std::lock_guard lock(mu_);
  return gcra_.grant(tat_, std::max(now_us, t_us));
}

Result<UseResult> TokenBucketLimiter::start(Slot& slot, std::int64_t now_us) {
  if (now_us < slot.at_us) {
    return fail(Error::invalid_argument("a limiter slot was used before its time (a bug in the caller)"));
  }
  std::lock_guard lock(mu_);
  return gcra_.use(tat_, slot, now_us);
}

Status TokenBucketLimiter::cancel(const Slot& slot) {
  std::lock_guard lock(mu_);
  gcra_.give_back(tat_, slot);
  return {};
}

std::string TokenBucketLimiter::describe() const {
  return std::to_string(rate_) + "/" + common::format_duration(std::chrono::microseconds(per_)) +
         " token bucket, burst " + std::to_string(burst_);
}

}  // namespace ratchet::limit
