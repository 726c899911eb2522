// Performs the plugin operation of one job step through the decorators its
// config declares, in the fixed order: circuit breaker, retry, limiters, the
// call. This is the StepCaller the assembled engine gives its runtime.
//
// A wait shorter than the park threshold is waited out in place; a longer
// one (a limiter slot far ahead, a backoff, an open circuit) returns
// park_until, and the step's retry state and reserved slot are kept here
// until the job comes back for them, so a parked job keeps its place in line
// and its retries are not reset by parking. They are dropped when the engine
// says the job cannot come back (forget), or when the database shows it gone
// elsewhere (forget_parked). A parked step counts as parked now until it
// comes back or is dropped.
//
// Ownership: owns the plugin host, the gates and one HTTP client per plugin;
// a call holds its client until it ends, so a reload never frees one in use.
// Thread-safety: call() runs on many worker threads at once.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "config/spec.hpp"
#include "http/client.hpp"
#include "pipeline/gate_registry.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/plugins.hpp"
#include "retry/call_gate.hpp"
#include "runtime/step_caller.hpp"

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

// A job with steps parked in a caller, for checking against the database.
struct ParkedJob {
  JobId job = 0;
  int attempt = 0;
  std::uint64_t park = 0;  // the latest park of its steps (see forget_parked)
};

class PluginStepCaller final : public runtime::StepCaller {
 public:
  PluginStepCaller(std::shared_ptr<plugin_host::PluginHost> host, config::ConfigPtr config,
                   limit::ConnectionFactory connect, std::shared_ptr<const Clock> clock, std::uint64_t seed);

  runtime::CallOutcome call(const runtime::StepCall& call, std::stop_token stop) override;
  void forget(JobId job, int attempt) override;
  void set_resume(Resume resume) override;
  void parked(JobId job, int attempt) override;

  // New policies and settings apply from the next call.
  void reconfigure(config::ConfigPtr config);

  plugin_host::PluginHost& host() { return *host_; }
  GateRegistry& gates() { return gates_; }
  std::map<std::string, CallCounters> counters() const;

  // Jobs with a step parked here, each with the number of its latest park.
  std::vector<ParkedJob> parked_jobs() const;
  // Forgets the steps of `job` up to `attempt` that are parked by `park` or
  // an earlier park. A step that came back since, or parked again, stays:
  // whatever showed the job gone was read before that.
  void forget_parked(JobId job, int attempt, std::uint64_t park);

 private:
  using StepKey = std::tuple<JobId, std::string, int>;

  // One step call across its parks, from its first admission to its outcome.
  struct StepEntry {
    StepEntry(std::string plugin_name, TimePoint now);
    retry::CallState call;  // used by the step's own call() only, outside mu_
    std::string plugin;
    TimePoint started;                            // its first admission here
    std::uint64_t park = 0;                       // nonzero while parked: the number of that park
    std::optional<TimePoint> limiter_wait_since;  // waiting for a limiter slot since then
    // Parked for a permit or a probe (a wait with no known end): resumed by
    // the end of a call of its plugin, once its park has committed.
    bool awaits_release = false;
    bool park_committed = false;
    bool woken = false;
  };

  // Steps of one plugin parked for what a call of it frees when it ends, in
  // the order they parked. Entries are checked when taken, not removed when
  // a step comes back or is forgotten.
  struct ReleaseWaiters {
    std::deque<std::pair<StepKey, std::weak_ptr<StepEntry>>> permit;  // one resumed per ended call
    std::deque<std::pair<StepKey, std::weak_ptr<StepEntry>>> probe;   // all resumed by an ended call
    std::uint64_t ended = 0;                                          // calls of the plugin ended so far
  };
  // Counts an ended call of `plugin` and marks the waiters it frees as woken.
  // Returns the jobs to resume now (their parks committed). Needs mu_.
  std::vector<std::pair<JobId, int>> end_call(const std::string& plugin);

  // The plugin's client for `policy`, shared: a reload that replaces it
  // leaves calls in flight on the old one, which ends with its last call.
  Result<std::shared_ptr<http::Client>> client_for(const std::string& plugin,
                                                   const config::CallPolicy& policy);
  std::vector<std::string> secrets_of(const config::Config& config, const config::PluginSpec* spec) const;
  config::ConfigPtr current() const;
  // Adds the entry's limiter wait up to `now` to its plugin. Needs mu_.
  void end_limiter_wait(StepEntry& entry, TimePoint now);
  // Takes the steps of `job` up to `attempt` that `drop` selects out of the
  // map and returns them. Needs mu_.
  template <typename Pred>
  std::vector<std::shared_ptr<StepEntry>> erase_steps(JobId job, int attempt, Pred drop);

  std::shared_ptr<plugin_host::PluginHost> host_;
  GateRegistry gates_;
  std::shared_ptr<const Clock> clock_;

  mutable std::mutex mu_;  // guards the members below and every StepEntry field but `call`
  config::ConfigPtr config_;
  std::map<std::string, std::shared_ptr<http::Client>> clients_;
  std::map<StepKey, std::shared_ptr<StepEntry>> steps_;
  std::map<std::string, CallCounters> counters_;
  std::uint64_t parks_made_ = 0;
  std::map<std::string, ReleaseWaiters> waiters_;  // by plugin
  Resume resume_;
};

}  // namespace ratchet::pipeline
