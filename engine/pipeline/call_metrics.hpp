// What the decorators did for each plugin since the engine opened: calls,
// throttled answers, retries, parks, limiter waits and step durations per
// operation. The step caller counts into it; Engine::call_stats reads it.
//
// Thread-safety: none of its own; the step caller's lock guards it together
// with its parked steps, so a snapshot of both agrees.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ratchet/clock.hpp"
#include "ratchet/plugins.hpp"

namespace ratchet::pipeline {

// What the decorators did for one plugin, for status lines and metrics.
struct CallCounters {
  std::uint64_t calls = 0;                             // plugin calls made
  std::uint64_t throttled = 0;                         // calls answered 429 / throttled
  std::uint64_t retries = 0;                           // calls retried after a failure
  std::uint64_t parks = 0;                             // steps parked for a wait
  std::uint64_t parked_now = 0;                        // steps whose last outcome was a park, not back yet
  Duration limiter_wait{};                             // waits for a limiter slot, those going on included
  std::map<std::string, DurationHistogram> durations;  // step calls per operation
};

// An empty histogram of step durations. Its buckets reach from a call
// answered at once to a step parked for an hour behind a slow limit.
DurationHistogram step_duration_histogram();
// Counts `d` into `h`, one of step_duration_histogram() (or empty: it
// becomes one first).
void observe(DurationHistogram& h, Duration d);

class CallMetrics {
 public:
  void count_call(const std::string& plugin, bool throttled);
  void count_retry(const std::string& plugin);
  void count_park(const std::string& plugin);
  // A wait for a limiter slot that ended (a negative one, from a clock set
  // back, counts as none).
  void add_limiter_wait(const std::string& plugin, Duration waited);
  // A step call of `plugin`.`operation` that came to an outcome after `took`.
  void observe_step(const std::string& plugin, const std::string& operation, Duration took);

  const std::map<std::string, CallCounters>& counters() const { return counters_; }

 private:
  std::map<std::string, CallCounters> counters_;  // by plugin
};

}  // namespace ratchet::pipeline
