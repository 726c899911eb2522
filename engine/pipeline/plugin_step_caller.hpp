// Performs the plugin operation of one job step through the decorators its
// config declares, in the fixed order: circuit breaker, retry, limiters, the
// call. This is the StepCaller the assembled engine gives its runtime.
//
// A wait shorter than the park threshold is waited out in place; a longer
// one (a limiter slot far ahead, a backoff, an open circuit) returns
// park_until, and the step's retry state and reserved slot are kept here
// until the job comes back for them, so a parked job keeps its place in line
// and its retries are not reset by parking.
//
// Ownership: owns the plugin host, the gates and one HTTP client per plugin.
// Thread-safety: call() runs on many worker threads at once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "config/spec.hpp"
#include "http/client.hpp"
#include "pipeline/gate_registry.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/clock.hpp"
#include "retry/call_gate.hpp"
#include "runtime/step_caller.hpp"

namespace ratchet::pipeline {

// Counters of what the decorators did, for status lines and metrics.
struct CallCounters {
  std::uint64_t calls = 0;      // plugin calls made
  std::uint64_t throttled = 0;  // calls answered 429 / throttled
  std::uint64_t retries = 0;    // calls retried after a failure
  std::uint64_t parks = 0;      // steps parked for a wait
};

class PluginStepCaller final : public runtime::StepCaller {
 public:
  PluginStepCaller(std::shared_ptr<plugin_host::PluginHost> host, config::ConfigPtr config,
                   limit::ConnectionFactory connect, std::shared_ptr<const Clock> clock, std::uint64_t seed);

  runtime::CallOutcome call(const runtime::StepCall& call, std::stop_token stop) override;

  // New policies and settings apply from the next call.
  void reconfigure(config::ConfigPtr config);

  plugin_host::PluginHost& host() { return *host_; }
  GateRegistry& gates() { return gates_; }
  std::map<std::string, CallCounters> counters() const;

 private:
  using StepKey = std::tuple<JobId, std::string, int>;

  Result<http::Client*> client_for(const std::string& plugin, const config::CallPolicy& policy);
  std::vector<std::string> secrets_of(const config::PluginSpec* spec) const;
  config::ConfigPtr current() const;

  std::shared_ptr<plugin_host::PluginHost> host_;
  GateRegistry gates_;
  std::shared_ptr<const Clock> clock_;

  mutable std::mutex mu_;  // guards the members below
  config::ConfigPtr config_;
  std::map<std::string, std::unique_ptr<http::Client>> clients_;
  std::map<StepKey, std::shared_ptr<retry::StepCall>> steps_;
  std::map<std::string, CallCounters> counters_;
};

}  // namespace ratchet::pipeline
