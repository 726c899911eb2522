#include "retry/retry_decision.hpp"

#include <algorithm>
#include <chrono>

#include "common/duration.hpp"
#include "retry/backoff.hpp"

namespace ratchet::retry {
namespace {

std::string show(Duration d) {
  return common::format_duration(std::chrono::ceil<std::chrono::microseconds>(std::max(d, Duration::zero())));
}

Error error_for(const Outcome& o, std::string message) {
  switch (o.kind) {
    case OutcomeKind::kThrottled: return Error::throttled(std::move(message));
    case OutcomeKind::kTimeout: return Error::timeout(std::move(message));
    case OutcomeKind::kConnect: return Error::unavailable(std::move(message));
    default: return Error::plugin(std::move(message));
  }
}

bool throttling(const config::RetrySpec& spec, const Outcome& o) {
  return o.kind == OutcomeKind::kThrottled && spec.on.contains(config::RetryOn::kThrottled);
}

}  // namespace

bool retries(const config::RetrySpec& spec, const Outcome& o) {
  using config::RetryOn;
  if (o.http_status != 0 && spec.statuses.contains(o.http_status)) return true;
  switch (o.kind) {
    case OutcomeKind::kOk:
    case OutcomeKind::kFatal: return false;
    case OutcomeKind::kThrottled: return spec.on.contains(RetryOn::kThrottled);
    case OutcomeKind::kHttp:
      return o.http_status >= 500 && o.http_status < 600 && spec.on.contains(RetryOn::k5xx);
    case OutcomeKind::kTimeout: return spec.on.contains(RetryOn::kTimeout);
    case OutcomeKind::kConnect: return spec.on.contains(RetryOn::kConnect);
    case OutcomeKind::kRetryable: return spec.on.contains(RetryOn::kRetryable);
  }
  return false;
}

RetryVerdict decide_retry(const config::RetrySpec& spec, Duration max_wait, RetryState& state,
                          const Outcome& outcome, std::optional<TimePoint> server_resume, TimePoint now,
                          double u01) {
  RetryVerdict v;
  if (outcome.is_ok()) return v;
  auto give_up = [&](std::string why) {
    v.kind = RetryVerdict::Kind::kFail;
    v.error = error_for(outcome, std::move(why));
    return v;
  };
  if (!retries(spec, outcome))
    return give_up(outcome.describe() + " (not retried: add it to retry.on to retry)");

  Duration server_wait = Duration::zero();
  if (server_resume) server_wait = std::max(Duration::zero(), *server_resume - now);
  if (outcome.retry_after) server_wait = std::max(server_wait, *outcome.retry_after);

  Duration delay;
  if (throttling(spec, outcome)) {
    ++state.throttled;
    // Without a word from the server, back off on the throttled count so a
    // 429 storm slows down; the server's own time wins when longer.
    delay = std::max(backoff_delay(spec.backoff, state.throttled, Duration::zero(), u01), server_wait);
    if (state.throttled_wait + delay > max_wait) {
      return give_up(outcome.describe() + ": throttled " + std::to_string(state.throttled) +
                     " times, waiting " + show(state.throttled_wait + delay) +
                     " in all would pass max_wait " + show(max_wait) +
                     " (raise max_wait or lower the request rate)");
    }
    state.throttled_wait += delay;
    v.throttled = true;
  } else {
    ++state.failures;
    if (state.failures >= spec.attempts) {
      // "Calls", not "attempts": the job's attempts are another count, and
      // the step shows that one ("attempts 1") beside this message.
      return give_up(outcome.describe() + " (gave up after " + std::to_string(state.failures) +
                     " failed calls" +
                     (state.throttled ? " and " + std::to_string(state.throttled) + " throttled ones" : "") +
                     " in this attempt of the job; retry.attempts = " + std::to_string(spec.attempts) + ")");
    }
    delay = backoff_delay(spec.backoff, state.failures, state.last_delay, u01);
    delay = std::max(delay, std::min(server_wait, std::chrono::duration_cast<Duration>(spec.backoff.max)));
    state.last_delay = delay;
  }
  v.kind = RetryVerdict::Kind::kRetry;
  v.at = now + delay;
  if (spec.deadline && v.at > state.began + *spec.deadline) {
    v.kind = RetryVerdict::Kind::kFail;
    v.throttled = false;
    v.error = Error::timeout(outcome.describe() + ": the next attempt (in " + show(delay) +
                             ") would start after the retry deadline of " + show(*spec.deadline));
  }
  return v;
}

}  // namespace ratchet::retry
