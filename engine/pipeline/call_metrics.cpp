#include "pipeline/call_metrics.hpp"

#include <algorithm>

namespace ratchet::pipeline {

DurationHistogram step_duration_histogram() {
  using std::chrono::milliseconds, std::chrono::seconds, std::chrono::minutes, std::chrono::hours;
  DurationHistogram h;
  h.bounds = {milliseconds(5),    milliseconds(10),  milliseconds(25),  milliseconds(50),
              milliseconds(100),  milliseconds(250), milliseconds(500), seconds(1),
              milliseconds(2500), seconds(5),        seconds(10),       seconds(30),
              minutes(1),         minutes(5),        minutes(15),       hours(1)};
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

void observe(DurationHistogram& h, Duration d) {
  if (h.counts.empty()) h = step_duration_histogram();
  // A clock set back must not make a negative duration.
  d = std::max(d, Duration::zero());
  auto bucket = std::ranges::lower_bound(h.bounds, d) - h.bounds.begin();
  ++h.counts[static_cast<std::size_t>(bucket)];
  h.sum += d;
  ++h.count;
}

void CallMetrics::count_call(const std::string& plugin, bool throttled) {
  auto& c = counters_[plugin];
  ++c.calls;
  if (throttled) ++c.throttled;
}

void CallMetrics::count_retry(const std::string& plugin) { ++counters_[plugin].retries; }

void CallMetrics::count_park(const std::string& plugin) { ++counters_[plugin].parks; }

void CallMetrics::add_limiter_wait(const std::string& plugin, Duration waited) {
  counters_[plugin].limiter_wait += std::max(Duration::zero(), waited);
}

void CallMetrics::observe_step(const std::string& plugin, const std::string& operation, Duration took) {
  observe(counters_[plugin].durations[operation], took);
}

}  // namespace ratchet::pipeline
