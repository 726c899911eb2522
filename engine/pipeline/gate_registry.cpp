#include "pipeline/gate_registry.hpp"

#include <sstream>

#include "limit/make_limiter.hpp"

namespace ratchet::pipeline {
namespace {

void write_policy(std::ostringstream& out, const config::CallPolicy& p) {
  for (const auto& l : p.limits) {
    out << "L" << static_cast<int>(l.algorithm) << ',' << l.rate << ',' << l.per.count() << ','
        << l.burst.value_or(0) << ',' << static_cast<int>(l.scope) << ';';
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

GateRegistry::GateRegistry(config::ConfigPtr config, limit::ConnectionFactory connect, std::uint64_t seed)
    : config_(std::move(config)), connect_(std::move(connect)), seed_(seed) {}

void GateRegistry::reconfigure(config::ConfigPtr config) {
  std::lock_guard lock(mu_);
  for (auto it = plugins_.begin(); it != plugins_.end();) {
    auto spec = config->plugins.find(it->first);
    bool same = spec != config->plugins.end() && policy_fingerprint(spec->second) == it->second.fingerprint;
    it = same ? std::next(it) : plugins_.erase(it);
  }
  config_ = std::move(config);
}

Result<GateRegistry::PluginParts*> GateRegistry::plugin_parts(const std::string& plugin) {
  if (auto it = plugins_.find(plugin); it != plugins_.end()) return &it->second;
  // A plugin present in the folder but not configured runs with the default
  // policy: retries and a breaker, no declared limit, a learned pace.
  static const config::PluginSpec kUnconfigured;
  auto found = config_->plugins.find(plugin);
  const config::PluginSpec& spec = found == config_->plugins.end() ? kUnconfigured : found->second;

  PluginParts parts;
  parts.fingerprint = policy_fingerprint(spec);
  for (const auto& l : spec.policy.limits) {
    auto made = limit::make_limiter(l, limit::limiter_key(plugin, l), connect_);
    if (!made) return fail(made.error().with_context("plugin " + plugin + " limit " + l.source.to_string()));
    parts.limiters.push_back(std::move(*made));
  }
  if (spec.policy.breaker.enabled)
    parts.breaker = std::make_shared<retry::CircuitBreaker>(spec.policy.breaker);
  parts.pacer =
      std::make_shared<limit::AdaptivePacer>(limit::plugin_pacing(retry::declared_pace(spec.policy.limits)));
  if (spec.policy.concurrency) parts.concurrency = limit::ConcurrencyLimiter::make(*spec.policy.concurrency);
  return &plugins_.emplace(plugin, std::move(parts)).first->second;
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
  gp.request_timeout = policy.timeout;
  gp.breaker = p.breaker;
  gp.pacer = p.pacer;
  gp.limiters = p.limiters;
  gp.concurrency = p.concurrency;
  gp.seed = seed_ ^ std::hash<std::string>{}(plugin + "." + operation);
  if (has_override) {
    auto& own = p.operation_limiters[operation];
    for (const auto& l : policy.limits) {
      auto made = limit::make_limiter(l, limit::limiter_key(plugin + "/" + operation, l), connect_);
      if (!made) return fail(made.error().with_context("plugin " + plugin + " operation " + operation));
      own.push_back(*made);
      gp.limiters.push_back(std::move(*made));
    }
    if (policy.concurrency && policy.concurrency != config_->plugins.at(plugin).policy.concurrency) {
      gp.concurrency = limit::ConcurrencyLimiter::make(*policy.concurrency);
    }
  }
  auto gate = std::make_shared<retry::CallGate>(std::move(gp));
  p.gates.emplace(operation, gate);
  return gate;
}

std::vector<LimiterView> GateRegistry::limiters(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  std::vector<LimiterView> out;
  auto add = [&](const std::string& plugin, const std::string& op, limit::Limiter& l, std::string declared) {
    auto next = l.earliest(now_us, now_us);
    out.push_back({plugin, op, std::move(declared), next ? *next : now_us});
  };
  for (auto& [plugin, parts] : plugins_) {
    for (auto& l : parts.limiters) add(plugin, "", *l, l->describe());
    for (auto& [op, ls] : parts.operation_limiters) {
      for (auto& l : ls) add(plugin, op, *l, l->describe());
    }
    if (parts.pacer) add(plugin, "", *parts.pacer, "learned: " + parts.pacer->describe());
  }
  return out;
}

}  // namespace ratchet::pipeline
