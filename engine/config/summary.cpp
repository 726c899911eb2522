#include "config/summary.hpp"

#include <fmt/format.h>

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

std::string path_text(const Config& c, const std::string& key, const std::filesystem::path& p) {
  return c.env_keys.contains(key) ? std::string("***") : p.string();
}

}  // namespace

nlohmann::json mask(nlohmann::json value, const std::set<std::string>& secret_paths) {
  for (const auto& pointer : secret_paths) {
    nlohmann::json::json_pointer ptr(pointer);
    if (value.contains(ptr)) value[ptr] = "***";
  }
  return value;
}

std::string summarize_policy(const CallPolicy& p) {
  std::string out = "limits ";
  if (p.limits.empty()) out += "none";
  for (std::size_t i = 0; i < p.limits.size(); ++i) out += (i ? ", " : "") + limit_text(p.limits[i]);
  if (p.concurrency) out += fmt::format("; concurrency {}", *p.concurrency);
  const auto& r = p.retry;
  out += fmt::format("; retry {} attempts {}", r.attempts, backoff_text(r.backoff));
  out += " on ";
  bool first = true;
  for (auto o : r.on) {
    out += (first ? "" : ",") + std::string(name(o));
    first = false;
  }
  for (int s : r.statuses) {
    out += (first ? "" : ",") + std::to_string(s);
    first = false;
  }
  if (first) out += "nothing";
  if (r.per_try_timeout) out += " per-try " + format_duration(*r.per_try_timeout);
  if (r.deadline) out += " deadline " + format_duration(*r.deadline);
  const auto& b = p.breaker;
  if (!b.enabled) {
    out += "; breaker off";
  } else {
    out += fmt::format("; breaker {} failures", b.consecutive_failures);
    if (b.failure_ratio)
      out += fmt::format(" or ratio {} of {}+ calls in {}", *b.failure_ratio, b.min_calls,
                         format_duration(b.window));
    out += fmt::format(", open {}", format_duration(b.open_for));
  }
  out += fmt::format("; timeout {} (connect {}), max_wait {}", format_duration(p.timeout),
                     format_duration(p.connect_timeout), format_duration(p.max_wait));
  return out;
}

std::string summarize_engine(const Config& c) {
  const auto& e = c.engine;
  return fmt::format(
      "engine: database {}, plugins {}, {} workers, synchronous {}, busy_timeout {}, lease {}, heartbeat {}, "
      "park_threshold {}, poll_interval {}, shutdown_grace {}, max_lease_expiries {}\n",
      path_text(c, "engine.database", e.database), path_text(c, "engine.plugins", e.plugins), e.workers,
      e.synchronous_full ? "full" : "normal", format_duration(e.busy_timeout), format_duration(e.lease),
      format_duration(e.heartbeat), format_duration(e.park_threshold), format_duration(e.poll_interval),
      format_duration(e.shutdown_grace), e.max_lease_expiries);
}

std::string summarize_plugin(const PluginSpec& p) {
  std::string out = fmt::format("plugin {}: {}\n", p.name, summarize_policy(p.policy));
  if (!p.settings.empty()) out += "  settings " + mask(p.settings, p.secret_paths).dump() + "\n";
  for (const auto& [op, policy] : p.operations) {
    out += fmt::format("  operation {}: {}\n", op, summarize_policy(policy));
  }
  return out;
}

std::string summarize_job(const JobTypeSpec& j) {
  std::string out = fmt::format("job {}: {} attempts, backoff {}, queue {}, priority {}", j.name, j.attempts,
                                backoff_text(j.backoff), j.queue, j.priority);
  if (j.timeout) out += ", timeout " + format_duration(*j.timeout);
  out += ", args ";
  if (j.args.empty()) out += "none";
  for (std::size_t i = 0; i < j.args.size(); ++i) {
    out += fmt::format("{}{}:{}{}", i ? ", " : "", j.args[i].name, name(j.args[i].type),
                       j.args[i].required ? "" : "?");
  }
  out += "\n";
  for (const auto& s : j.steps) {
    out += fmt::format("  step {}: {}.{} args {}", s.name, s.plugin, s.operation,
                       mask(s.args, s.secret_paths).dump());
    if (!s.after.empty()) {
      out += " after ";
      for (std::size_t i = 0; i < s.after.size(); ++i) out += (i ? "," : "") + s.after[i];
    }
    if (s.max_wait) out += " max_wait " + format_duration(*s.max_wait);
    out += "\n";
  }
  return out;
}

std::string summarize(const Config& c) {
  std::string out = fmt::format(
      "{}: {} plugin{}, {} job type{}\n", c.file.empty() ? "config" : c.file.string(), c.plugins.size(),
      c.plugins.size() == 1 ? "" : "s", c.jobs.size(), c.jobs.size() == 1 ? "" : "s");
  out += summarize_engine(c);
  for (const auto& [name_, plugin] : c.plugins) out += summarize_plugin(plugin);
  for (const auto& [name_, job] : c.jobs) out += summarize_job(job);
  return out;
}

}  // namespace ratchet::config
