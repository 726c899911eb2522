#include "config/summary.hpp"

#include <fmt/format.h>

#include "common/database_url.hpp"
#include "common/duration.hpp"

namespace ratchet::config {
namespace {

using common::format_duration;

std::string_view name(LimitAlgorithm a) {
  switch (a) {
    case LimitAlgorithm::kSlidingWindow: return "sliding_window";
    case LimitAlgorithm::kTokenBucket: return "token_bucket";
    case LimitAlgorithm::kFixedWindow: return "fixed_window";
  }
  return "?";
}

std::string_view name(Backoff b) {
  switch (b) {
    case Backoff::kConstant: return "constant";
    case Backoff::kLinear: return "linear";
    case Backoff::kExponential: return "exponential";
    case Backoff::kDecorrelated: return "decorrelated";
  }
  return "?";
}

std::string_view name(Jitter j) {
  switch (j) {
    case Jitter::kNone: return "none";
    case Jitter::kFull: return "full";
    case Jitter::kEqual: return "equal";
  }
  return "?";
}

std::string_view name(RetryOn o) {
  switch (o) {
    case RetryOn::kThrottled: return "throttled";
    case RetryOn::k5xx: return "5xx";
    case RetryOn::kTimeout: return "timeout";
    case RetryOn::kConnect: return "connect";
    case RetryOn::kRetryable: return "retryable";
  }
  return "?";
}

std::string_view name(ArgType t) {
  switch (t) {
    case ArgType::kString: return "string";
    case ArgType::kNumber: return "number";
    case ArgType::kInteger: return "integer";
    case ArgType::kBoolean: return "boolean";
    case ArgType::kObject: return "object";
    case ArgType::kArray: return "array";
    case ArgType::kAny: return "any";
  }
  return "?";
}

std::string backoff_text(const BackoffSpec& b) {
  std::string out =
      fmt::format("{} {}..{}", name(b.kind), format_duration(b.initial), format_duration(b.max));
  if (b.kind == Backoff::kExponential) out += fmt::format(" x{}", b.multiplier);
  out += fmt::format(" jitter {}", name(b.jitter));
  return out;
}

std::string limit_text(const LimitSpec& l) {
  std::string out = fmt::format("{}/{} {}", l.rate, format_duration(l.per), name(l.algorithm));
  if (l.burst) out += fmt::format(" burst {}", *l.burst);
  if (l.scope == LimitScope::kDatabase) out += " database-wide";
  return out;
}

// Hides values that came from ${NAME}: a field is shown as *** when its key
// path, under any of the prefixes (an operation's own, then its plugin's),
// is one of the config's env keys or lies inside one.
class EnvMask {
 public:
  EnvMask(const std::set<std::string>& keys, std::vector<std::string> prefixes)
      : keys_(keys), prefixes_(std::move(prefixes)) {}

  bool hides(std::initializer_list<std::string_view> fields) const {
    for (const auto& prefix : prefixes_) {
      for (auto field : fields) {
        std::string key = prefix + std::string(field);
        for (auto it = keys_.lower_bound(key); it != keys_.end() && it->starts_with(key); ++it) {
          if (it->size() == key.size() || (*it)[key.size()] == '.' || (*it)[key.size()] == '[') return true;
        }
      }
    }
    return false;
  }
  std::string show(std::initializer_list<std::string_view> fields, std::string text) const {
    return hides(fields) ? std::string("***") : text;
  }

 private:
  const std::set<std::string>& keys_;
  std::vector<std::string> prefixes_;
};

const std::set<std::string> kNoKeys;

std::string policy_text(const CallPolicy& p, const EnvMask& m) {
  std::string limits;
  if (p.limits.empty()) limits = "none";
  for (std::size_t i = 0; i < p.limits.size(); ++i) limits += (i ? ", " : "") + limit_text(p.limits[i]);
  std::string out = "limits " + m.show({"limit"}, limits);
  if (p.concurrency) out += fmt::format("; concurrency {}", *p.concurrency);
  if (p.cost_template) {
    out += fmt::format("; cost {} units", *p.cost_template);
  } else if (p.cost != 1) {
    out += fmt::format("; cost {} units", p.cost);
  }
  const auto& r = p.retry;
  out +=
      fmt::format("; retry {} attempts {}", r.attempts,
                  m.show({"retry.backoff", "retry.initial", "retry.max", "retry.multiplier", "retry.jitter"},
                         backoff_text(r.backoff)));
  std::string on;
  for (auto o : r.on) on += (on.empty() ? "" : ",") + std::string(name(o));
  for (int s : r.statuses) on += (on.empty() ? "" : ",") + std::to_string(s);
  if (on.empty()) on = "nothing";
  out += " on " + m.show({"retry.on", "retry.statuses"}, on);
  if (r.per_try_timeout)
    out += " per-try " + m.show({"retry.per_try_timeout"}, format_duration(*r.per_try_timeout));
  if (r.deadline) out += " deadline " + m.show({"retry.deadline"}, format_duration(*r.deadline));
  const auto& b = p.breaker;
  std::string breaker;
  if (!b.enabled) {
    breaker = "off";
  } else {
    breaker = fmt::format("{} failures", b.consecutive_failures);
    if (b.failure_ratio) {
      breaker += fmt::format(" or ratio {} of {}+ calls in {}", *b.failure_ratio, b.min_calls,
                             format_duration(b.window));
    }
    breaker += fmt::format(", open {}", format_duration(b.open_for));
  }
  out += "; breaker " + m.show({"circuit_breaker"}, breaker);
  out +=
      fmt::format("; timeout {} (connect {}), max_wait {}", m.show({"timeout"}, format_duration(p.timeout)),
                  m.show({"connect_timeout"}, format_duration(p.connect_timeout)),
                  m.show({"max_wait"}, format_duration(p.max_wait)));
  return out;
}

}  // namespace

nlohmann::json mask(nlohmann::json value, const std::set<std::string>& secret_paths) {
  for (const auto& pointer : secret_paths) {
    nlohmann::json::json_pointer ptr(pointer);
    if (value.contains(ptr)) value[ptr] = "***";
  }
  return value;
}

std::string summarize_policy(const CallPolicy& p) { return policy_text(p, EnvMask(kNoKeys, {})); }

std::string summarize_engine(const Config& c) {
  const auto& e = c.engine;
  EnvMask m(c.env_keys, {"engine."});
  return fmt::format(
      "engine: database {}, plugins {}, {} workers, {}, busy_timeout {}, lease {}, heartbeat {}, "
      "park_threshold {}, poll_interval {}, shutdown_grace {}, max_lease_expiries {}\n",
      m.show({"database"}, e.database.string()), m.show({"plugins"}, e.plugins.string()), e.workers,
      common::is_server_url(e.database.native())
          ? "postgres connect_timeout " +
                m.show({"postgres.connect_timeout"}, format_duration(e.postgres_connect_timeout))
          : "sqlite synchronous " +
                m.show({"sqlite.synchronous"}, e.sqlite_synchronous_full ? "full" : "normal"),
      m.show({"busy_timeout"}, format_duration(e.busy_timeout)), m.show({"lease"}, format_duration(e.lease)),
      m.show({"heartbeat"}, format_duration(e.heartbeat)),
      m.show({"park_threshold"}, format_duration(e.park_threshold)),
      m.show({"poll_interval"}, format_duration(e.poll_interval)),
      m.show({"shutdown_grace"}, format_duration(e.shutdown_grace)), e.max_lease_expiries);
}

std::string summarize_plugin(const PluginSpec& p, const std::set<std::string>& env_keys) {
  const std::string prefix = "plugin." + p.name + ".";
  std::string out =
      fmt::format("plugin {}: {}\n", p.name, policy_text(p.policy, EnvMask(env_keys, {prefix})));
  if (!p.settings.empty()) out += "  settings " + mask(p.settings, p.secret_paths).dump() + "\n";
  for (const auto& [op, policy] : p.operations) {
    // Limits of an operation are its own; every other field may be the plugin's.
    EnvMask m(env_keys, {prefix + "operation." + op + ".", prefix});
    out += fmt::format("  operation {}: {}\n", op, policy_text(policy, m));
  }
  return out;
}

std::string summarize_job(const JobTypeSpec& j, const std::set<std::string>& env_keys) {
  EnvMask m(env_keys, {"job." + j.name + "."});
  std::string out =
      fmt::format("job {}: {} attempts, backoff {}, queue {}, priority {}", j.name, j.attempts,
                  m.show({"backoff", "initial", "max", "multiplier", "jitter"}, backoff_text(j.backoff)),
                  j.queue, j.priority);
  if (j.timeout) out += ", timeout " + m.show({"timeout"}, format_duration(*j.timeout));
  out += ", args ";
  if (j.args.empty()) out += "none";
  for (std::size_t i = 0; i < j.args.size(); ++i) {
    out += fmt::format("{}{}:{}{}", i ? ", " : "", j.args[i].name, name(j.args[i].type),
                       j.args[i].required ? "" : "?");
  }
  out += "\n";
  for (std::size_t i = 0; i < j.steps.size(); ++i) {
    const auto& s = j.steps[i];
    out += fmt::format("  step {}: {}.{} args {}", s.name, s.plugin, s.operation,
                       mask(s.args, s.secret_paths).dump());
    if (!s.after.empty()) {
      out += " after ";
      for (std::size_t k = 0; k < s.after.size(); ++k) out += (k ? "," : "") + s.after[k];
    }
    if (s.max_wait) {
      EnvMask step_mask(env_keys, {"job." + j.name + ".steps[" + std::to_string(i) + "]."});
      out += " max_wait " + step_mask.show({"max_wait"}, format_duration(*s.max_wait));
    }
    out += "\n";
  }
  return out;
}

std::string summarize(const Config& c) {
  std::string out = fmt::format(
      "{}: {} plugin{}, {} job type{}\n", c.file.empty() ? "config" : c.file.string(), c.plugins.size(),
      c.plugins.size() == 1 ? "" : "s", c.jobs.size(), c.jobs.size() == 1 ? "" : "s");
  out += summarize_engine(c);
  for (const auto& [plugin_name, plugin] : c.plugins) out += summarize_plugin(plugin, c.env_keys);
  for (const auto& [job_name, job] : c.jobs) out += summarize_job(job, c.env_keys);
  return out;
}

}  // namespace ratchet::config
