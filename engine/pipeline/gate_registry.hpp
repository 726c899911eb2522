// The call gates (circuit breaker, retry, limiters) of every plugin
// operation, built from the config and kept for the engine's lifetime.
//
// A plugin's own limits, its circuit breaker, its learned pace and its
// concurrency cap are shared by all of its operations: the server counts the
// plugin's calls, whichever endpoint they hit. An operation's own limits
// (`[plugin.X.operation.Y]`) apply to that operation in addition.
//
// Reconfiguring keeps the gates of every plugin whose call policy did not
// change and rebuilds the others; the new policy applies from the next call.
// A declared limit holds across both (docs/semantics.md point 11): a rebuilt plugin
// keeps each limiter whose limit is unchanged, with its window, and a
// changed limit starts from the calls already counted. Process-scope limits
// record their owner's recent starts (limit/start_journal.hpp) in the
// database, so the limiters of the next process start from them too.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/spec.hpp"
#include "limit/adaptive_pacer.hpp"
#include "limit/concurrency.hpp"
#include "limit/database_limiter.hpp"
#include "limit/limiter.hpp"
#include "limit/start_journal.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"
#include "retry/call_gate.hpp"
#include "retry/circuit_breaker.hpp"

namespace ratchet::pipeline {

// What `ratchet limits` shows of one limiter.
struct LimiterView {
  std::string plugin;
  std::string operation;  // empty for the plugin's own limits
  std::string key;        // of a keyed limit: the key (or "N keys" for the limit as a whole)
  std::string declared;   // "10/1s sliding window", or "learned" for the pacer
  std::int64_t next_free_us = 0;
};

class GateRegistry {
 public:
  // How far ahead turns grant slots (retry/turn_queue.hpp): long enough for
  // a resumed step to come back before its slot, short enough that a key
  // that starts waiting gets its turn soon and that a learned pace which
  // slows moves few slots granted.
  static constexpr Duration kTurnsAhead = std::chrono::milliseconds(500);

  // `connect` opens the shared database for database-scope limits and the
  // history of process-scope ones (empty: no database, history kept across
  // reloads only); `clock` (default: the system clock) dates them.
  GateRegistry(config::ConfigPtr config, limit::ConnectionFactory connect, std::uint64_t seed,
               std::shared_ptr<const Clock> clock = nullptr);

  // The gate of `plugin`.`operation`, built on first use.
  [[nodiscard]] Result<std::shared_ptr<retry::CallGate>> gate(const std::string& plugin,
                                                              const std::string& operation);

  // Switches to a new config; see the header comment for what is kept.
  void reconfigure(config::ConfigPtr config);

  // The calls still to come beside those waiting for turns, for every
  // plugin's turns (retry::TurnQueue::set_backlog).
  void set_backlog(retry::TurnQueue::Backlog backlog);

  // Every limiter built so far, with its next free start time as of now_us.
  std::vector<LimiterView> limiters(std::int64_t now_us);

 private:
  // The declared limits of one owner (a plugin, or one of its operations).
  struct OwnerLimits {
    std::vector<std::shared_ptr<limit::Limiter>> limiters;
    std::vector<std::string> identities;  // what each limiter was built from
    std::vector<retry::KeyedLimit> keyed;
    std::vector<std::string> keyed_identities;
    std::shared_ptr<limit::StartJournal> journal;  // null without process-scope limits
    // Of the process-scope keyed limits, by key template (with a database).
    std::map<std::string, std::shared_ptr<limit::KeyedJournal>> key_journals;
  };
  struct PluginParts {
    std::string fingerprint;  // the call policy it was built from
    OwnerLimits limits;
    std::shared_ptr<retry::CircuitBreaker> breaker;
    std::string breaker_shape;
    std::shared_ptr<limit::AdaptivePacer> pacer;
    Duration pace{};
    // With keyed limits of the plugin's own: the learned pace per key of the first.
    std::shared_ptr<limit::KeyedLimiters> key_pacers;
    std::string key_pace_shape;
    // The turns of all of the plugin's gates (between keys on the limits
    // they share, or for a pace or a cost being learned); kept across
    // reloads with its queue.
    std::shared_ptr<retry::TurnQueue> turns;
    // The turns' name among the processes sharing the database (empty:
    // kept in this process alone; limit/turn_shares.hpp).
    std::string turn_shares_name;
    std::shared_ptr<limit::ConcurrencyLimiter> concurrency;
    std::optional<int> concurrency_cap;
    std::map<std::string, std::shared_ptr<retry::CallGate>> gates;  // by operation
    std::map<std::string, OwnerLimits> operation_limits;
  };

  [[nodiscard]] Result<PluginParts*> plugin_parts(const std::string& plugin);
  // Builds the limits of `owner` from `specs`, taking over what `old` holds.
  [[nodiscard]] Result<OwnerLimits> build_limits(const std::string& owner,
                                                 const std::vector<config::LimitSpec>& specs,
                                                 OwnerLimits* old);

  std::mutex mu_;
  config::ConfigPtr config_;
  limit::ConnectionFactory connect_;
  std::uint64_t seed_;
  std::shared_ptr<const Clock> clock_;
  std::map<std::string, PluginParts> plugins_;
  std::map<std::string, PluginParts> replaced_;  // by a reload; their state moves to the rebuilt parts
  retry::TurnQueue::Backlog backlog_;
  std::optional<std::string> key_salt_;  // read on the first keyed limit
};

// A stable text of everything in a plugin's policies that shapes its gates.
std::string policy_fingerprint(const config::PluginSpec& spec);

}  // namespace ratchet::pipeline
