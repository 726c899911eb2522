// The call gates (circuit breaker, retry, limiters) of every plugin
// operation, built from the config and kept for the engine's lifetime.
//
// A plugin's own limits, its circuit breaker, its learned pace and its
// concurrency cap are shared by all of its operations: the server counts the
// plugin's calls, whichever endpoint they hit. An operation's own limits
// (`[plugin.X.operation.Y]`) apply to that operation in addition.
//
// Reconfiguring keeps the state of every plugin whose call policy did not
// change (so a reload never forgets the calls already counted) and rebuilds
// the others; the new policy applies from the next call.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "config/spec.hpp"
#include "limit/adaptive_pacer.hpp"
#include "limit/concurrency.hpp"
#include "limit/database_limiter.hpp"
#include "limit/limiter.hpp"
#include "ratchet/status.hpp"
#include "retry/call_gate.hpp"
#include "retry/circuit_breaker.hpp"

namespace ratchet::pipeline {

// What `ratchet limits` shows of one limiter.
struct LimiterView {
  std::string plugin;
  std::string operation;  // empty for the plugin's own limits
  std::string declared;   // "10/1s sliding window", or "learned" for the pacer
  std::int64_t next_free_us = 0;
};

class GateRegistry {
 public:
  // `connect` opens the shared database for database-scope limits.
  GateRegistry(config::ConfigPtr config, limit::ConnectionFactory connect, std::uint64_t seed);

  // The gate of `plugin`.`operation`, built on first use.
  Result<std::shared_ptr<retry::CallGate>> gate(const std::string& plugin, const std::string& operation);

  // Switches to a new config; see the header comment for what is kept.
  void reconfigure(config::ConfigPtr config);

  // Every limiter built so far, with its next free start time as of now_us.
  std::vector<LimiterView> limiters(std::int64_t now_us);

 private:
  struct PluginParts {
    std::string fingerprint;  // the call policy it was built from
    std::vector<std::shared_ptr<limit::Limiter>> limiters;
    std::shared_ptr<retry::CircuitBreaker> breaker;
    std::shared_ptr<limit::AdaptivePacer> pacer;
    std::shared_ptr<limit::ConcurrencyLimiter> concurrency;
    std::map<std::string, std::shared_ptr<retry::CallGate>> gates;  // by operation
    std::map<std::string, std::vector<std::shared_ptr<limit::Limiter>>> operation_limiters;
  };

  Result<PluginParts*> plugin_parts(const std::string& plugin);

  std::mutex mu_;
  config::ConfigPtr config_;
  limit::ConnectionFactory connect_;
  std::uint64_t seed_;
  std::map<std::string, PluginParts> plugins_;
};

// A stable text of everything in a plugin's policies that shapes its gates.
std::string policy_fingerprint(const config::PluginSpec& spec);

}  // namespace ratchet::pipeline
