#include "pipeline/gate_registry.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "limit/key_identity.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"
#include "limit/turn_shares.hpp"

namespace ratchet::pipeline {
namespace {

void write_policy(std::ostringstream& out, const config::CallPolicy& p) {
  for (const auto& l : p.limits) {
    out << "L" << static_cast<int>(l.algorithm) << ',' << l.rate << ',' << l.per.count() << ','
        << l.burst.value_or(0) << ',' << static_cast<int>(l.scope) << ',' << l.key.value_or("") << ',';
    for (const auto& [key, weight] : l.weights) out << key.size() << ':' << key << '=' << weight << ',';
    out << ';';
  }
  out << "C" << p.concurrency.value_or(0) << ";R" << p.retry.attempts << ','
      << static_cast<int>(p.retry.backoff.kind) << ',' << p.retry.backoff.initial.count() << ','
      << p.retry.backoff.max.count() << ',' << p.retry.backoff.multiplier << ','
      << static_cast<int>(p.retry.backoff.jitter) << ','
      << p.retry.per_try_timeout.value_or(config::microseconds{-1}).count() << ','
      << p.retry.deadline.value_or(config::microseconds{-1}).count() << ',';
  for (auto on : p.retry.on) out << static_cast<int>(on) << '|';
  for (int s : p.retry.statuses) out << s << '|';
  const auto& b = p.breaker;
  out << ";B" << b.enabled << ',' << b.consecutive_failures << ',' << b.failure_ratio.value_or(-1) << ','
      << b.min_calls << ',' << b.window.count() << ',' << b.open_for.count() << ',' << b.half_open_probes;
  out << ";T" << p.connect_timeout.count() << ',' << p.timeout.count() << ',' << p.max_wait.count() << ';';
}

// Takes out of `items` the one built from `identity` (identities[i] names
// items[i]), if any.
template <typename T>
std::optional<T> take_same(std::vector<std::string>& identities, std::vector<T>& items,
                           const std::string& identity) {
  auto same = std::find(identities.begin(), identities.end(), identity);
  if (same == identities.end()) return std::nullopt;
  const auto i = same - identities.begin();
  std::optional<T> out(std::move(items[static_cast<std::size_t>(i)]));
  identities.erase(same);
  items.erase(items.begin() + i);
  return out;
}

}  // namespace

std::string policy_fingerprint(const config::PluginSpec& spec) {
  std::ostringstream out;
  write_policy(out, spec.policy);
  for (const auto& [name, op] : spec.operations) {
    out << '[' << name << ']';
    write_policy(out, op);
  }
  return out.str();
}

GateRegistry::GateRegistry(config::ConfigPtr config, limit::ConnectionFactory connect, std::uint64_t seed,
                           std::shared_ptr<const Clock> clock)
    : config_(std::move(config)),
      connect_(std::move(connect)),
      seed_(seed),
      clock_(clock ? std::move(clock) : SystemClock::instance()) {}

void GateRegistry::reconfigure(config::ConfigPtr config) {
  std::lock_guard lock(mu_);
  for (auto it = plugins_.begin(); it != plugins_.end();) {
    auto spec = config->plugins.find(it->first);
    if (spec != config->plugins.end() && policy_fingerprint(spec->second) == it->second.fingerprint) {
      ++it;
      continue;
    }
    // Rebuilt on its next call, from the state these parts hold (gates
    // already handed out keep working on them until then).
    it->second.gates.clear();
    replaced_.insert_or_assign(it->first, std::move(it->second));
    it = plugins_.erase(it);
  }
  config_ = std::move(config);
}

Result<GateRegistry::OwnerLimits> GateRegistry::build_limits(const std::string& owner,
                                                             const std::vector<config::LimitSpec>& specs,
                                                             OwnerLimits* old) {
  OwnerLimits out;
  limit::StartJournal::Options journal;
  std::int64_t min_rate = 0;
  std::int64_t min_per = 0;
  for (const auto& l : specs) {
    // Keyed limits keep journals of their own (limit/keyed_journal.hpp).
    if (l.scope != config::LimitScope::kProcess || l.key) continue;
    const std::int64_t per = l.per.count() + limit::jitter_margin_us(l.per.count());
    journal.keep_us = std::max(journal.keep_us, per);
    min_rate = min_rate == 0 ? l.rate : std::min(min_rate, l.rate);
    min_per = min_per == 0 ? per : std::min(min_per, per);
  }
  const std::int64_t now = limit::to_micros(clock_->now());
  if (journal.keep_us > 0) {
    journal = limit::StartJournal::Options::for_limits(journal.keep_us, min_rate, min_per);
    if (old && old->journal) {
      out.journal = old->journal;
      out.journal->set_options(journal);
    } else {
      auto opened = limit::StartJournal::open(owner, journal, connect_, now);
      if (!opened) return fail(opened.error());
      out.journal = std::move(*opened);
    }
  }
  const std::vector<limit::Start> history =
      out.journal ? out.journal->history(now) : std::vector<limit::Start>{};
  // One journal per key template of the process-scope keyed limits, kept
  // across reloads as the unkeyed one is; templates whose journal this
  // process already recorded in (a limit made over one counts those calls).
  std::set<std::string> recorded;
  for (const auto& l : specs) {
    if (!l.key || !connect_ || out.key_journals.contains(*l.key)) continue;
    auto options = retry::keyed_journal_options(specs, *l.key);
    if (!options) continue;
    if (old && old->key_journals.contains(*l.key)) {
      auto& kept = old->key_journals.at(*l.key);
      kept->set_options(*options);
      out.key_journals.emplace(*l.key, kept);
      recorded.insert(*l.key);
      continue;
    }
    auto opened = retry::open_keyed_journal(owner, *l.key, *options, connect_, clock_);
    if (!opened) return fail(opened.error().with_context("limit " + l.source.to_string()));
    out.key_journals.emplace(*l.key, std::move(*opened));
  }
  for (const auto& l : specs) {
    const std::string key = limit::limiter_key(owner, l);
    const std::string identity = key + (l.scope == config::LimitScope::kDatabase ? "/database" : "/process");
    // A changed database-scope sliding window keeps its name, and with it
    // the calls counted (database_limit_name).
    const std::string name =
        l.scope == config::LimitScope::kDatabase ? limit::database_limit_name(owner, l, specs) : key;
    if (l.key) {
      // An unchanged keyed limit keeps every key's window.
      std::optional<retry::KeyedLimit> keyed =
          old ? take_same(old->keyed_identities, old->keyed, identity) : std::nullopt;
      if (!keyed) {
        std::shared_ptr<limit::KeyedJournal> starts;
        if (l.scope == config::LimitScope::kProcess) {
          if (auto it = out.key_journals.find(*l.key); it != out.key_journals.end()) starts = it->second;
        }
        // A new or changed limit counts the calls of its keys this process
        // made before the reload: the server still counts them.
        if (starts && recorded.contains(*l.key)) starts->recount(now);
        auto made = retry::make_keyed_limit(l, name, connect_, clock_, starts);
        if (!made) return fail(made.error().with_context("limit " + l.source.to_string()));
        keyed = std::move(*made);
      }
      keyed->weights = l.weights;
      out.keyed.push_back(std::move(*keyed));
      out.keyed_identities.push_back(identity);
      continue;
    }
    // An unchanged limit keeps its limiter, and with it its window.
    std::shared_ptr<limit::Limiter> limiter;
    if (old) limiter = take_same(old->identities, old->limiters, identity).value_or(nullptr);
    if (!limiter) {
      auto made = limit::make_limiter(l, name, connect_, clock_);
      if (!made) return fail(made.error().with_context("limit " + l.source.to_string()));
      limiter = std::move(*made);
      // A new or changed limit counts the calls the server has already seen.
      if (l.scope == config::LimitScope::kProcess) limiter->count_started(history);
    }
    out.limiters.push_back(std::move(limiter));
    out.identities.push_back(identity);
  }
  // Each call is recorded once, by the first limit over its template: the
  // limits dropped by a reload, whose gates may still run, only read.
  for (const auto& [tmpl, starts] : out.key_journals) {
    for (const auto& k : out.keyed) {
      if (k.journal != starts) continue;
      starts->records_from(k.journal_limit);
      break;
    }
  }
  return out;
}

Result<GateRegistry::PluginParts*> GateRegistry::plugin_parts(const std::string& plugin) {
  if (auto it = plugins_.find(plugin); it != plugins_.end()) return &it->second;
  // A plugin present in the folder but not configured runs with the default
  // policy: retries and a breaker, no declared limit, a learned pace.
  static const config::PluginSpec kUnconfigured;
  auto found = config_->plugins.find(plugin);
  const config::PluginSpec& spec = found == config_->plugins.end() ? kUnconfigured : found->second;
  PluginParts* old = nullptr;
  if (auto it = replaced_.find(plugin); it != replaced_.end()) old = &it->second;

  PluginParts parts;
  parts.fingerprint = policy_fingerprint(spec);
  auto limits = build_limits(plugin, spec.policy.limits, old ? &old->limits : nullptr);
  if (!limits) return fail(limits.error().with_context("plugin " + plugin));
  parts.limits = std::move(*limits);
  const auto& b = spec.policy.breaker;
  std::ostringstream breaker_shape;
  breaker_shape << b.enabled << ',' << b.consecutive_failures << ',' << b.failure_ratio.value_or(-1) << ','
                << b.min_calls << ',' << b.window.count() << ',' << b.open_for.count() << ','
                << b.half_open_probes;
  parts.breaker_shape = breaker_shape.str();
  if (old && old->breaker_shape == parts.breaker_shape) {
    parts.breaker = old->breaker;
  } else if (b.enabled) {
    parts.breaker = std::make_shared<retry::CircuitBreaker>(b);
  }
  parts.pace = retry::declared_pace(spec.policy.limits);
  // What the server said still holds while the declared pace is the same.
  parts.pacer = old && old->pace == parts.pace
                    ? old->pacer
                    : std::make_shared<limit::AdaptivePacer>(limit::plugin_pacing(parts.pace));
  for (const auto& l : spec.policy.limits) {
    if (!l.key) continue;
    const Duration floor =
        std::max(parts.pace, std::chrono::duration_cast<Duration>(l.per) / std::max<std::int64_t>(1, l.rate));
    parts.key_pace_shape = *l.key + "/" + std::to_string(floor.count());
    parts.key_pacers =
        old && old->key_pace_shape == parts.key_pace_shape ? old->key_pacers : retry::make_key_pacers(floor);
    break;
  }
  parts.concurrency_cap = spec.policy.concurrency;
  if (old && old->concurrency_cap == parts.concurrency_cap) {
    parts.concurrency = old->concurrency;  // its permits are still out
  } else if (spec.policy.concurrency) {
    parts.concurrency = limit::ConcurrencyLimiter::make(*spec.policy.concurrency);
  }
  if (old) parts.operation_limits = std::move(old->operation_limits);  // taken over by gate()
  if (old) {
    parts.turns = old->turns;
    parts.turn_shares_name = old->turn_shares_name;
  }
  auto* made = &plugins_.insert_or_assign(plugin, std::move(parts)).first->second;
  replaced_.erase(plugin);
  return made;
}

Result<std::shared_ptr<retry::CallGate>> GateRegistry::gate(const std::string& plugin,
                                                            const std::string& operation) {
  std::lock_guard lock(mu_);
  auto parts = plugin_parts(plugin);
  if (!parts) return fail(parts.error());
  PluginParts& p = **parts;
  if (auto it = p.gates.find(operation); it != p.gates.end()) return it->second;

  const config::CallPolicy& policy = config_->policy_for(plugin, operation);
  bool has_override = false;
  if (auto spec = config_->plugins.find(plugin); spec != config_->plugins.end()) {
    has_override = spec->second.operations.contains(operation);
  }

  retry::CallGateParts gp;
  gp.retry = policy.retry;
  gp.max_wait = policy.max_wait;
  // A header's wait is capped at the plugin's max_wait (docs/semantics.md
  // rule 9): a day's quota answers Retry-After: 7200.
  gp.headers.max_wait = policy.max_wait;
  gp.request_timeout = policy.timeout;
  gp.cost = policy.cost;
  gp.cost_template = policy.cost_template;
  gp.breaker = p.breaker;
  gp.pacer = p.pacer;
  gp.limiters = p.limits.limiters;
  gp.keyed = p.limits.keyed;  // first: the key pacers follow keyed[0]
  gp.key_pacers = p.key_pacers;
  gp.pacer_key = 0;
  if (p.limits.journal) gp.limiters.push_back(p.limits.journal);
  gp.concurrency = p.concurrency;
  gp.seed = seed_ ^ std::hash<std::string>{}(plugin + "." + operation);
  // Half the tightest jitter margin at most: the other half is the way to the server.
  auto slack_for = [&gp](const std::vector<config::LimitSpec>& limits) {
    for (const auto& l : limits) {
      gp.send_slack = std::min<Duration>(
          gp.send_slack, std::chrono::microseconds(limit::jitter_margin_us(l.per.count()) / 2));
    }
  };
  slack_for(policy.limits);
  if (auto spec = config_->plugins.find(plugin); spec != config_->plugins.end())
    slack_for(spec->second.policy.limits);
  auto previous = p.operation_limits.find(operation);
  if (has_override) {
    OwnerLimits* old = previous != p.operation_limits.end() ? &previous->second : nullptr;
    auto own = build_limits(plugin + "/" + operation, policy.limits, old);
    if (!own) return fail(own.error().with_context("plugin " + plugin + " operation " + operation));
    gp.limiters.insert(gp.limiters.end(), own->limiters.begin(), own->limiters.end());
    gp.keyed.insert(gp.keyed.end(), own->keyed.begin(), own->keyed.end());
    if (own->journal) gp.limiters.push_back(own->journal);
    p.operation_limits.insert_or_assign(operation, std::move(*own));
    if (policy.concurrency && policy.concurrency != config_->plugins.at(plugin).policy.concurrency) {
      gp.concurrency = limit::ConcurrencyLimiter::make(*policy.concurrency);
    }
  } else if (previous != p.operation_limits.end()) {
    p.operation_limits.erase(previous);
  }
  if (!gp.keyed.empty()) {
    if (!key_salt_) {
      auto salt = limit::key_salt(connect_);
      if (!salt) return fail(salt.error().with_context("plugin " + plugin));
      key_salt_ = std::move(*salt);
    }
    gp.key_salt = *key_salt_;
  }
  // Turns: between keys; for a plugin that declares no limit, whose pace
  // is learned as it goes (a slot granted far ahead in it would move as it
  // learns, and its step park again); and otherwise for the steps admitted
  // at a cost learned from the replies (CallGateParts::every_step_in_turn).
  const bool learned_only = gp.limiters.empty() && gp.keyed.empty();
  gp.every_step_in_turn = learned_only;
  // Slots are granted up to kTurnsAhead ahead between keys, and a park
  // threshold ahead otherwise: a step granted its turn is resumed a park
  // threshold before its slot and waits for it in place. A pace still being
  // learned, or costs still being corrected, would move a slot granted
  // further ahead.
  const Duration ahead = gp.keyed.empty() ? config_->engine.park_threshold : kTurnsAhead;
  if (!p.turns) {
    p.turns = std::make_shared<retry::TurnQueue>(std::max<Duration>(ahead, config_->engine.park_threshold));
    p.turns->set_backlog(backlog_);
  }
  gp.turns = p.turns;
  if (!gp.keyed.empty()) {
    // Between keys, the processes sharing the database take turns on the
    // plugin's database-scope limits with the keys they have waiting.
    constexpr std::string_view kDatabase = "/database";
    std::string name;
    for (const std::string& id : p.limits.identities) {
      if (!id.ends_with(kDatabase)) continue;
      name += (name.empty() ? "turns/" : "+") + id.substr(0, id.size() - kDatabase.size());
    }
    if (name != p.turn_shares_name) {
      std::shared_ptr<limit::TurnShares> shares;
      if (!name.empty()) {
        auto opened = limit::DatabaseTurnShares::open(name, connect_);
        if (!opened) return fail(opened.error().with_context("plugin " + plugin));
        shares = std::move(*opened);
      }
      p.turns->share_with(std::move(shares));
      p.turn_shares_name = name;
    }
  }
  auto gate = std::make_shared<retry::CallGate>(std::move(gp));
  p.gates.emplace(operation, gate);
  return gate;
}

void GateRegistry::set_backlog(retry::TurnQueue::Backlog backlog) {
  std::lock_guard lock(mu_);
  backlog_ = std::move(backlog);
  for (auto* parts : {&plugins_, &replaced_}) {
    for (auto& [name, p] : *parts) {
      if (p.turns) p.turns->set_backlog(backlog_);
    }
  }
}

std::vector<LimiterView> GateRegistry::limiters(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  std::vector<LimiterView> out;
  auto add = [&](const std::string& plugin, const std::string& op, limit::Limiter& l, std::string declared,
                 std::string key = {}) {
    auto next = l.earliest(now_us, now_us);
    out.push_back({plugin, op, std::move(key), std::move(declared), next ? *next : now_us});
  };
  // A keyed limit shows how many keys it keeps, and the keys that wait now
  // (the busiest first, at most kShownKeys of them).
  constexpr std::size_t kShownKeys = 20;
  auto add_keyed = [&](const std::string& plugin, const std::string& op, const retry::KeyedLimit& k) {
    auto keys = k.limiters->snapshot();
    std::string declared =
        keys.empty() ? "per key " + k.key : keys.front().second->describe() + " per key " + k.key;
    out.push_back({plugin, op, std::to_string(keys.size()) + " keys", declared, now_us});
    std::vector<LimiterView> waiting;
    for (auto& [key, l] : keys) {
      auto next = l->earliest(now_us, now_us);
      if (next && *next > now_us) waiting.push_back({plugin, op, key, declared, *next});
    }
    std::sort(waiting.begin(), waiting.end(),
              [](const LimiterView& a, const LimiterView& b) { return a.next_free_us > b.next_free_us; });
    if (waiting.size() > kShownKeys) waiting.resize(kShownKeys);
    out.insert(out.end(), waiting.begin(), waiting.end());
  };
  for (auto& [plugin, parts] : plugins_) {
    for (auto& l : parts.limits.limiters) add(plugin, "", *l, l->describe());
    for (const auto& k : parts.limits.keyed) add_keyed(plugin, "", k);
    for (auto& [op, own] : parts.operation_limits) {
      for (auto& l : own.limiters) add(plugin, op, *l, l->describe());
      for (const auto& k : own.keyed) add_keyed(plugin, op, k);
    }
    if (parts.pacer) add(plugin, "", *parts.pacer, "learned: " + parts.pacer->describe());
    if (parts.key_pacers) {
      // The keys whose learned pace holds their calls back now.
      std::vector<LimiterView> waiting;
      for (auto& [key, l] : parts.key_pacers->snapshot()) {
        auto next = l->earliest(now_us, now_us);
        if (next && *next > now_us) waiting.push_back({plugin, "", key, "learned: " + l->describe(), *next});
      }
      std::sort(waiting.begin(), waiting.end(),
                [](const LimiterView& a, const LimiterView& b) { return a.next_free_us > b.next_free_us; });
      if (waiting.size() > kShownKeys) waiting.resize(kShownKeys);
      out.insert(out.end(), waiting.begin(), waiting.end());
    }
  }
  return out;
}

}  // namespace ratchet::pipeline
