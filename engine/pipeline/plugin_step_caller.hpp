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
// The parked steps live in pipeline/parked_steps.hpp, what the calls did in
// pipeline/call_metrics.hpp and the plugins' HTTP clients in
// pipeline/client_cache.hpp; this file is the call loop over them.
//
// Ownership: owns the plugin host, the gates and one HTTP client per plugin;
// a call holds its client until it ends, so a reload never frees one in use.
// Thread-safety: call() runs on many worker threads at once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/spec.hpp"
#include "pipeline/call_metrics.hpp"
#include "pipeline/client_cache.hpp"
#include "pipeline/gate_registry.hpp"
#include "pipeline/parked_steps.hpp"
#include "pipeline/turn_keeper.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/plugins.hpp"
#include "retry/call_gate.hpp"
#include "runtime/step_caller.hpp"

namespace ratchet::pipeline {

class PluginStepCaller final : public runtime::StepCaller {
 public:
  PluginStepCaller(std::shared_ptr<plugin_host::PluginHost> host, config::ConfigPtr config,
                   limit::ConnectionFactory connect, std::shared_ptr<const Clock> clock, std::uint64_t seed);

  runtime::CallOutcome call(const runtime::StepCall& call, std::stop_token stop) override;
  void forget(JobId job, int attempt) override;
  void set_resume(Resume resume) override;
  void set_extend(Extend extend) override;
  void set_backlog(Backlog backlog) override;
  // A step parked for its turn is parked this long at a time, and its park
  // moved on while this process lives (set_extend): after a crash it wakes
  // that soon. Moved every kTurnParkEvery.
  static constexpr Duration kTurnPark = std::chrono::seconds(3);
  static constexpr Duration kTurnParkEvery = std::chrono::seconds(1);
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
  std::vector<std::string> secrets_of(const config::Config& config, const config::PluginSpec* spec) const;
  config::ConfigPtr current() const;
  // The turn that the step at `key` waits for was granted: resumes it.
  void turn_granted(const ParkedSteps::Key& key, const std::weak_ptr<ParkedSteps::Entry>& entry,
                    TimePoint slot);
  // Moves the parks of the steps waiting for their turns on (set_extend).
  void extend_turn_parks(TimePoint now);
  // Adds the entry's limiter wait up to `now` to its plugin. Needs mu_.
  void end_limiter_wait(ParkedSteps::Entry& entry, TimePoint now);
  // A call that could not be set up for a fault of the engine's own, not
  // of its step: its limits' database could not be opened or read (too
  // many open files, a disk gone, a lock held past busy_timeout), or its
  // HTTP client not made. Nothing was sent, so no attempt is charged: the
  // step parks, 1 s doubling to a minute while the fault lasts, and tries
  // again. Empty for any other error (the step fails with it).
  std::optional<runtime::CallOutcome> setup_fault(const runtime::StepCall& call, ParkedSteps::Entry& entry,
                                                  const Error& error);

  std::shared_ptr<plugin_host::PluginHost> host_;
  GateRegistry gates_;
  std::shared_ptr<const Clock> clock_;

  mutable std::mutex mu_;  // guards the members below but clients_
  config::ConfigPtr config_;
  ClientCache clients_;  // locks for itself
  ParkedSteps steps_;
  CallMetrics metrics_;
  Resume resume_;
  Extend extend_;
  TimePoint next_extend_{};
  // When each plugin's last setup fault was logged: once per kSetupLogEvery.
  std::map<std::string, TimePoint> setup_logged_;
  static constexpr Duration kSetupLogEvery = std::chrono::seconds(10);
  TurnKeeper keeper_;  // last: its thread stops before what its wake-ups use goes
};

}  // namespace ratchet::pipeline
