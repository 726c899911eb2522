#include <array>

#include "config/bounds.hpp"
#include "config/sections.hpp"
#include "config/suggest.hpp"
#include "config/template.hpp"

namespace ratchet::config::detail {
namespace {

constexpr std::array<std::string_view, 10> kPolicyKeys = {"limit",         "concurrency",
                                                          "retry",         "circuit_breaker",
                                                          "timeout",       "connect_timeout",
                                                          "max_wait",      "max_response_bytes",
                                                          "max_redirects", "cost"};
// The policy keys a plugin setting may not be mistaken for. "cost" is
// reserved too, but is left out of the typo check: a word that short is
// near "host" and "hosts", which plugins use as settings.
constexpr std::array<std::string_view, 10> kTypoCheckedKeys = {
    "limit",    "concurrency",        "retry",         "circuit_breaker", "timeout", "connect_timeout",
    "max_wait", "max_response_bytes", "max_redirects", "operation"};
constexpr std::array<std::string_view, 7> kLimitKeys = {"rate",  "per", "burst",  "algorithm",
                                                        "scope", "key", "weights"};
constexpr std::array<std::string_view, 10> kRetryKeys = {
    "attempts", "backoff",         "initial",  "max", "multiplier",
    "jitter",   "per_try_timeout", "deadline", "on",  "statuses"};
constexpr std::array<std::string_view, 7> kBreakerKeys = {
    "enabled",  "consecutive_failures", "failure_ratio", "min_calls", "window",
    "open_for", "half_open_probes"};

bool is_policy_key(std::string_view k) {
  for (auto p : kPolicyKeys) {
    if (p == k) return true;
  }
  return false;
}

std::optional<LimitSpec> read_limit(Reader& r, const toml::node& node, const std::string& path) {
  const auto* t = r.table(node, path);
  if (t == nullptr) return std::nullopt;
  r.check_keys(*t, path, kLimitKeys, "a limit");
  LimitSpec l;
  l.source = r.ref(*t, path);
  bool ok = r.require(*t, path, "rate");
  ok = r.require(*t, path, "per") && ok;
  std::optional<LimitAlgorithm> algorithm;
  const toml::node* algorithm_node = nullptr;
  const toml::node* weights_node = nullptr;
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "rate") {
      if (auto v = r.integer(value, at, 1, kMaxRate)) {
        l.rate = *v;
      } else {
        ok = false;
      }
    } else if (k == "per") {
      if (auto v = r.duration(value, at, Bound::kLimitPeriod)) {
        l.per = *v;
      } else {
        ok = false;
      }
    } else if (k == "burst") {
      if (auto v = r.integer(value, at, 1, kMaxBurst)) {
        l.burst = *v;
      } else {
        ok = false;
      }
    } else if (k == "algorithm") {
      algorithm_node = &value;
      algorithm = r.choice<LimitAlgorithm>(value, at,
                                           {{"sliding_window", LimitAlgorithm::kSlidingWindow},
                                            {"token_bucket", LimitAlgorithm::kTokenBucket},
                                            {"fixed_window", LimitAlgorithm::kFixedWindow}});
      if (!algorithm) ok = false;
    } else if (k == "key") {
      if (auto v = r.string(value, at)) {
        if (v->from_env) {
          r.error(value, at,
                  "write the key literally; a key naming a secret reads it from the plugin's settings, "
                  "e.g. \"{{settings.api_key}}\"");
          ok = false;
        }
        for (const auto& why : key_template_errors(v->value)) {
          r.error(value, at, why);
          ok = false;
        }
        l.key = v->value;
      } else {
        ok = false;
      }
    } else if (k == "weights") {
      weights_node = &value;
      if (const auto* w = r.table(value, at)) {
        for (auto&& [name, weight] : *w) {
          if (auto v = r.integer(weight, child_path(at, std::string(name.str())), 1, kMaxWeight)) {
            l.weights.emplace(std::string(name.str()), *v);
          } else {
            ok = false;
          }
        }
      } else {
        ok = false;
      }
    } else if (k == "scope") {
      if (auto v = r.choice<LimitScope>(
              value, at, {{"process", LimitScope::kProcess}, {"database", LimitScope::kDatabase}})) {
        l.scope = *v;
      } else {
        ok = false;
      }
    }
  }
  if (algorithm) {
    l.algorithm = *algorithm;
    if (l.burst && *algorithm != LimitAlgorithm::kTokenBucket) {
      r.error(*algorithm_node, child_path(path, "algorithm"),
              "burst applies only to algorithm = \"token_bucket\" (remove burst, or use the token bucket)");
      ok = false;
    }
  } else if (l.burst) {
    l.algorithm = LimitAlgorithm::kTokenBucket;
  }
  if (weights_node != nullptr && !l.key) {
    r.error(*weights_node, child_path(path, "weights"),
            "weights share a limit between the keys of a keyed limit: add key = \"{{args.NAME}}\" to this "
            "limit, or remove weights");
    ok = false;
  } else if (weights_node != nullptr && l.key->find("{{settings.") != std::string::npos) {
    // Weights name keys by their text, and a key read from the settings
    // is a secret: it must never be written in the config.
    r.error(*weights_node, child_path(path, "weights"),
            "weights name keys by their text, and a key read from the settings is a secret: weigh keys taken "
            "from a job argument (key = \"{{args.NAME}}\"), or remove weights");
    ok = false;
  }
  // A token bucket declared without a burst allows none: calls are spaced evenly.
  if (l.algorithm == LimitAlgorithm::kTokenBucket && !l.burst) l.burst = 1;
  if (!ok) return std::nullopt;
  return l;
}

void read_limits(Reader& r, const toml::node& node, const std::string& path, std::vector<LimitSpec>& out) {
  out.clear();
  if (node.is_table()) {
    if (auto l = read_limit(r, node, path)) out.push_back(std::move(*l));
    return;
  }
  const auto* a = node.as_array();
  if (a == nullptr) {
    r.error(
        node, path,
        "expected an array of limit tables ([[...limit]]) or one table, got " + std::string(type_name(node)));
    return;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    if (auto l = read_limit(r, *a->get(i), index_path(path, i))) out.push_back(std::move(*l));
  }
}

void read_retry(Reader& r, const toml::node& node, const std::string& path, RetrySpec& retry) {
  const auto* t = r.table(node, path);
  if (t == nullptr) return;
  r.check_keys(*t, path, kRetryKeys, "a retry policy");
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "attempts") {
      if (auto v = r.integer(value, at, 1, 1000)) retry.attempts = static_cast<int>(*v);
    } else if (k == "backoff") {
      if (auto v = r.choice<Backoff>(value, at,
                                     {{"constant", Backoff::kConstant},
                                      {"linear", Backoff::kLinear},
                                      {"exponential", Backoff::kExponential},
                                      {"decorrelated", Backoff::kDecorrelated}})) {
        retry.backoff.kind = *v;
      }
    } else if (k == "initial") {
      if (auto v = r.duration(value, at, Bound::kPositive)) retry.backoff.initial = *v;
    } else if (k == "max") {
      if (auto v = r.duration(value, at, Bound::kPositive)) retry.backoff.max = *v;
    } else if (k == "multiplier") {
      if (auto v = r.number(value, at)) {
        if (*v < 1.0 || *v > 100.0) {
          r.error(value, at, "must be between 1 and 100");
        } else {
          retry.backoff.multiplier = *v;
        }
      }
    } else if (k == "jitter") {
      if (auto v = r.choice<Jitter>(
              value, at, {{"none", Jitter::kNone}, {"full", Jitter::kFull}, {"equal", Jitter::kEqual}})) {
        retry.backoff.jitter = *v;
      }
    } else if (k == "per_try_timeout") {
      if (auto v = r.duration(value, at, Bound::kTimeout)) retry.per_try_timeout = *v;
    } else if (k == "deadline") {
      if (auto v = r.duration(value, at, Bound::kTimeout)) retry.deadline = *v;
    } else if (k == "on") {
      const auto* a = r.array(value, at);
      if (a == nullptr) continue;
      std::set<RetryOn> on;
      for (std::size_t i = 0; i < a->size(); ++i) {
        if (auto v = r.choice<RetryOn>(*a->get(i), index_path(at, i),
                                       {{"throttled", RetryOn::kThrottled},
                                        {"5xx", RetryOn::k5xx},
                                        {"timeout", RetryOn::kTimeout},
                                        {"connect", RetryOn::kConnect},
                                        {"retryable", RetryOn::kRetryable}})) {
          on.insert(*v);
        }
      }
      retry.on = std::move(on);
    } else if (k == "statuses") {
      const auto* a = r.array(value, at);
      if (a == nullptr) continue;
      std::set<int> statuses;
      for (std::size_t i = 0; i < a->size(); ++i) {
        if (auto v = r.integer(*a->get(i), index_path(at, i), 100, 599))
          statuses.insert(static_cast<int>(*v));
      }
      retry.statuses = std::move(statuses);
    }
  }
}

void read_breaker(Reader& r, const toml::node& node, const std::string& path, BreakerSpec& breaker) {
  if (node.is_boolean()) {
    breaker.enabled = node.as_boolean()->get();
    return;
  }
  const auto* t = node.as_table();
  if (t == nullptr) {
    r.error(node, path, "expected a table or true/false, got " + std::string(type_name(node)));
    return;
  }
  r.check_keys(*t, path, kBreakerKeys, "a circuit breaker");
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "enabled") {
      if (auto v = r.boolean(value, at)) breaker.enabled = *v;
    } else if (k == "consecutive_failures") {
      if (auto v = r.integer(value, at, 1, 1'000'000)) breaker.consecutive_failures = static_cast<int>(*v);
    } else if (k == "failure_ratio") {
      if (auto v = r.number(value, at)) {
        if (!(*v > 0.0 && *v <= 1.0)) {
          r.error(value, at, "must be a ratio in (0, 1], e.g. 0.5");
        } else {
          breaker.failure_ratio = *v;
        }
      }
    } else if (k == "min_calls") {
      if (auto v = r.integer(value, at, 1, 1'000'000)) breaker.min_calls = static_cast<int>(*v);
    } else if (k == "window") {
      if (auto v = r.duration(value, at, Bound::kPositive)) breaker.window = *v;
    } else if (k == "open_for") {
      if (auto v = r.duration(value, at, Bound::kPositive)) breaker.open_for = *v;
    } else if (k == "half_open_probes") {
      if (auto v = r.integer(value, at, 1, 1000)) breaker.half_open_probes = static_cast<int>(*v);
    }
  }
}

// Applies the policy keys declared in `t` onto `policy`; other keys are ignored.
void apply_policy(Reader& r, const toml::table& t, const std::string& path, CallPolicy& policy) {
  for (auto&& [key, value] : t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "limit") {
      read_limits(r, value, at, policy.limits);
    } else if (k == "concurrency") {
      if (auto v = r.integer(value, at, 1, 100'000)) policy.concurrency = static_cast<int>(*v);
    } else if (k == "retry") {
      read_retry(r, value, at, policy.retry);
    } else if (k == "circuit_breaker") {
      read_breaker(r, value, at, policy.breaker);
    } else if (k == "timeout") {
      if (auto v = r.duration(value, at, Bound::kTimeout)) policy.timeout = *v;
    } else if (k == "connect_timeout") {
      if (auto v = r.duration(value, at, Bound::kTimeout)) policy.connect_timeout = *v;
    } else if (k == "max_wait") {
      if (auto v = r.duration(value, at, Bound::kNonNegative)) policy.max_wait = *v;
    } else if (k == "max_response_bytes") {
      if (auto v = r.integer(value, at, 1, INT64_MAX)) policy.max_response_bytes = *v;
    } else if (k == "max_redirects") {
      if (auto v = r.integer(value, at, 0, 50)) policy.max_redirects = static_cast<int>(*v);
    } else if (k == "cost") {
      if (const auto* text = value.as_string()) {
        // One placeholder, a job argument: read for each call.
        const std::string tmpl = text->get();
        auto ref = tmpl.size() > 4 && tmpl.starts_with("{{") && tmpl.ends_with("}}")
                       ? parse_key_ref(tmpl.substr(2, tmpl.size() - 4))
                       : Result<TemplateRef>(fail(Error::invalid_argument("")));
        if (!ref || ref->root != TemplateRef::Root::kArgs) {
          r.error(value, at,
                  "cost is a whole number from 1 to " + std::to_string(kMaxCost) +
                      " or one job argument that holds it, as \"{{args.points}}\"; \"" + tmpl +
                      "\" is neither");
        } else {
          policy.cost_template = tmpl;
        }
      } else if (auto v = r.integer(value, at, 1, kMaxCost)) {
        policy.cost = *v;
        policy.cost_template.reset();
      }
    }
  }
}

// A call costing more than a limit can ever hold would wait for room that
// never comes: refused here, naming both.
void check_cost(Reader& r, const toml::table& t, const std::string& path, const CallPolicy& policy,
                const std::vector<LimitSpec>& limits) {
  if (policy.cost_template) return;  // read for each call; a call dearer than a limit is an overdraft
  const std::int64_t cost = policy.cost;
  for (const auto& l : limits) {
    const bool bucket = l.algorithm == LimitAlgorithm::kTokenBucket;
    const std::int64_t holds = bucket ? l.burst.value_or(1) : l.rate;
    if (cost <= holds) continue;
    const toml::node* at = t.get("cost");
    r.error(at != nullptr ? at->source() : t.source(), child_path(path, "cost"),
            "cost = " + std::to_string(cost) + " is more than the limit at " + l.source.key_path + " (line " +
                std::to_string(l.source.line) + ") can ever hold (" +
                (bucket ? "a burst of " + std::to_string(holds) : std::to_string(holds) + " per window") +
                "), so such a call could never start; lower the cost or raise the limit's " +
                (bucket ? "burst" : "rate"));
  }
}

// Checks relations between fields once the policy is complete (after merging).
void check_policy(Reader& r, const toml::table& t, const std::string& path, const CallPolicy& policy) {
  if (policy.retry.backoff.initial > policy.retry.backoff.max) {
    const toml::node* retry = t.get("retry");
    r.error(retry != nullptr ? retry->source() : t.source(), child_path(path, "retry"),
            "initial backoff is longer than max; make max at least initial");
  }
}

// A key over the plugin's settings must name settings it has: checked here,
// where the settings are known, rather than failing every call.
void check_limit_keys(Reader& r, const PluginSpec& p, const std::vector<LimitSpec>& limits) {
  for (const auto& l : limits) {
    if (!l.key) continue;
    for (const auto& expr : placeholders(nlohmann::json(*l.key))) {
      auto ref = parse_key_ref(expr);
      if (!ref || ref->root != TemplateRef::Root::kSettings) continue;
      const nlohmann::json* at = &p.settings;
      for (const auto& seg : ref->path) {
        auto it = at->is_object() ? at->find(seg) : at->end();
        if (!at->is_object() || it == at->end()) {
          at = nullptr;
          break;
        }
        at = &*it;
      }
      if (at == nullptr) {
        SourceRef where = l.source;
        where.key_path = child_path(where.key_path, "key");
        r.error(std::move(where), "limit key {{" + ref->text + "}}: plugin " + p.name + " has no setting " +
                                      ref->text.substr(9) + " (add it to [plugin." + p.name +
                                      "], or key the limit by a job argument)");
      }
    }
  }
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

PluginSpec read_plugin(Reader& r, const std::string& name, const toml::table& t) {
  const std::string path = child_path("plugin", name);
  PluginSpec p;
  p.name = name;
  p.source = r.ref(t, path);
  if (!valid_name(name)) {
    r.error(t, path, "a plugin name holds only letters, digits, '_' and '-'");
  }
  for (auto&& [key, value] : t) {
    const std::string k(key.str());
    if (k == "operation" || is_policy_key(k)) continue;
    // Settings are free-form, so a misspelt policy key ("retyr", "limits")
    // would silently become a setting and the policy would not apply.
    if (auto near = closest_match(k, kTypoCheckedKeys)) {
      r.error(key.source(), child_path(path, k),
              "\"" + k + "\" is so close to the policy key \"" + *near +
                  "\" that it is taken for a typo (did you mean \"" + *near +
                  "\"?); a plugin's own settings must be named differently");
      continue;
    }
    p.settings[k] = r.to_json(value, child_path(path, k), "/" + k, p.secret_paths);
  }
  apply_policy(r, t, path, p.policy);
  check_policy(r, t, path, p.policy);
  check_limit_keys(r, p, p.policy.limits);
  check_cost(r, t, path, p.policy, p.policy.limits);

  if (const toml::node* ops = t.get("operation")) {
    const std::string ops_path = child_path(path, "operation");
    if (const auto* ops_table = r.table(*ops, ops_path)) {
      for (auto&& [op_key, op_node] : *ops_table) {
        const std::string op(op_key.str());
        const std::string op_path = child_path(ops_path, op);
        const auto* op_table = r.table(op_node, op_path);
        if (op_table == nullptr) continue;
        if (!valid_name(op))
          r.error(op_key.source(), op_path, "an operation name holds only letters, digits, '_' and '-'");
        r.check_keys(*op_table, op_path, kPolicyKeys, "an operation override");
        CallPolicy merged = p.policy;
        merged.limits.clear();
        apply_policy(r, *op_table, op_path, merged);
        check_policy(r, *op_table, op_path, merged);
        check_limit_keys(r, p, merged.limits);
        if (op_table->contains("cost") || op_table->contains("limit")) {
          check_cost(r, *op_table, op_path, merged, p.policy.limits);
          check_cost(r, *op_table, op_path, merged, merged.limits);
        }
        p.operations[op] = std::move(merged);
      }
    }
  }
  return p;
}

}  // namespace ratchet::config::detail
