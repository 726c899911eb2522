// The validated, immutable description of what a configuration declares:
// the engine, each plugin's settings and call policies (limits, retry,
// circuit breaker, timeouts, per-operation overrides) and each job type.
//
// Config is built once by the TOML loader (config/load.hpp), every field
// checked and defaulted, then shared read-only (std::shared_ptr<const Config>)
// by every part of the engine; a reload builds a new Config and swaps the
// pointer. Nothing here parses or validates; the loader owns that.
//
// Secrets: a value taken from the environment with ${NAME} is resolved into
// the plugin's settings JSON, and its key path is listed in `secret_paths`
// so logs, summaries and error messages can mask it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ratchet::config {

using std::chrono::microseconds;

// Where a declaration came from, for error messages found after loading
// ("oscar.toml:12:3 plugin.imdb.limit[0]").
struct SourceRef {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;

  std::string to_string() const;  // "file:line:column: key_path"
};

// ---------------------------------------------------------------- limits

enum class LimitAlgorithm {
  // At most `rate` calls start in any interval of length `per` (exact, any
  // alignment). The default when no burst is declared.
  kSlidingWindow,
  // GCRA: rate/per with bursts of up to `burst`. The default when `burst` is set.
  kTokenBucket,
  // At most `rate` calls per window [k*per, (k+1)*per) aligned to the Unix epoch.
  kFixedWindow,
};

enum class LimitScope {
  kProcess,   // state in memory, per process
  kDatabase,  // state in the engine's database: shared by processes and hosts, survives restarts
};

struct LimitSpec {
  LimitAlgorithm algorithm = LimitAlgorithm::kSlidingWindow;
  std::int64_t rate = 0;              // calls; > 0
  microseconds per{0};                // window or period; > 0
  std::optional<std::int64_t> burst;  // token bucket size; >= 1
  LimitScope scope = LimitScope::kProcess;
  // A keyed limit is one budget per key: the text of this template for the
  // call ("{{args.account}}", "{{settings.api_key}}"; config/template.hpp).
  std::optional<std::string> key;
  // Of a keyed limit: the weight of a key (by its text) in the turns
  // between keys on the limits they share; a key not named weighs 1.
  std::map<std::string, std::int64_t> weights;
  SourceRef source;
};

// ----------------------------------------------------------------- retry

enum class Backoff { kConstant, kLinear, kExponential, kDecorrelated };
enum class Jitter { kNone, kFull, kEqual };

// What makes a failed call eligible for another attempt.
enum class RetryOn {
  kThrottled,  // HTTP 429 or a plugin's "throttled" status
  k5xx,        // HTTP 500-599
  kTimeout,    // per-try timeout or transport timeout
  kConnect,    // connection refused/reset, DNS failure
  kRetryable,  // the plugin reported "retryable"
};

struct BackoffSpec {
  Backoff kind = Backoff::kExponential;
  microseconds initial = std::chrono::milliseconds(200);
  microseconds max = std::chrono::seconds(30);
  double multiplier = 2.0;  // exponential growth; linear step is `initial`
  Jitter jitter = Jitter::kFull;
};

struct RetrySpec {
  int attempts = 3;  // total tries including the first; >= 1
  BackoffSpec backoff;
  std::optional<microseconds> per_try_timeout;  // bounds one attempt
  std::optional<microseconds> deadline;         // bounds all attempts of one step call
  std::set<RetryOn> on = {RetryOn::kThrottled, RetryOn::k5xx, RetryOn::kTimeout, RetryOn::kConnect,
                          RetryOn::kRetryable};
  std::set<int> statuses;  // extra HTTP statuses that are retried
};

// ------------------------------------------------------- circuit breaker

struct BreakerSpec {
  bool enabled = true;
  int consecutive_failures = 5;         // opens after this many failures in a row; >= 1
  std::optional<double> failure_ratio;  // or when failures/calls in `window` exceed this (0, 1]
  int min_calls = 10;                   // ratio needs at least this many calls in the window
  microseconds window = std::chrono::seconds(60);
  microseconds open_for = std::chrono::seconds(30);  // then half-open
  int half_open_probes = 1;                          // successes needed to close
};

// ------------------------------------------------------------- plugins

// The policy applied to calls of one plugin operation. A plugin's own policy
// is the default for its operations; `[plugin.X.operation.Y]` overrides it
// field by field (limits replace, they do not add: the plugin-level limits
// still apply to every operation as well).
struct CallPolicy {
  std::vector<LimitSpec> limits;
  std::optional<int> concurrency;  // at most this many calls in flight; >= 1
  RetrySpec retry;
  BreakerSpec breaker;
  microseconds connect_timeout = std::chrono::seconds(10);
  microseconds timeout = std::chrono::seconds(30);  // one HTTP request, total
  microseconds max_wait = std::chrono::hours(24);   // throttling waits of one step, in all
  std::int64_t max_response_bytes = 8 * 1024 * 1024;
  int max_redirects = 5;
  // The units of the limits one call costs (`cost = 5`); a limit's rate
  // counts units. A plugin may estimate and report each request's cost
  // itself (ratchet/plugin.h); this is the default for its estimate.
  std::int64_t cost = 1;
  // Or a job argument that holds it (`cost = "{{args.points}}"`), read for
  // each call: a whole number from 1 to 1,000,000.
  std::optional<std::string> cost_template;
};

struct PluginSpec {
  std::string name;
  nlohmann::json settings = nlohmann::json::object();  // free-form keys, ${ENV} resolved
  std::set<std::string> secret_paths;                  // JSON pointers into settings that hold secrets
  CallPolicy policy;                                   // plugin-wide limits apply to all operations
  // Per-operation overrides, fully merged: every field not declared for the
  // operation is the plugin's, except `limits`, which holds only the limits
  // declared for that operation (the plugin's own limits in `policy.limits`
  // are shared by all its operations and apply in addition).
  std::map<std::string, CallPolicy> operations;
  SourceRef source;
};

// ------------------------------------------------------------ job types

struct StepSpec {
  std::string name;
  std::string plugin;     // "imdb" of call = "imdb.get_rating"
  std::string operation;  // "get_rating"
  // Argument template: strings may hold {{args.X}} and {{steps.NAME.output.Y}}
  // placeholders, filled in when the step runs.
  nlohmann::json args = nlohmann::json::object();
  std::vector<std::string> after;        // steps this one needs; no dependency means concurrent
  std::optional<microseconds> max_wait;  // overrides the plugin's throttling bound
  std::set<std::string> secret_paths;    // JSON pointers into args whose value came from ${ENV}
  SourceRef source;
};

enum class ArgType { kString, kNumber, kInteger, kBoolean, kObject, kArray, kAny };

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kAny;
  bool required = true;
};

struct JobTypeSpec {
  std::string name;
  int attempts = 20;  // job attempts before dead; >= 1
  BackoffSpec backoff{Backoff::kExponential, std::chrono::seconds(1), std::chrono::hours(1), 2.0,
                      Jitter::kFull};
  std::optional<microseconds> timeout;  // one job attempt
  std::string queue = "default";
  int priority = 0;
  std::vector<ArgSpec> args;   // declared or inferred from {{args.X}} placeholders
  bool args_inferred = false;  // no `args` table: inferred (also from the keys of limits its steps meet)
  std::vector<StepSpec> steps;
  // Arguments whose values are shown as "[redacted]" wherever jobs are shown
  // (`ratchet jobs`, the dashboard and its API); the job still gets them.
  std::vector<std::string> redact;
  SourceRef source;
};

// --------------------------------------------------------------- engine

struct EngineSpec {
  // A file (relative paths resolve against the config file) or a server URL.
  std::filesystem::path database = "ratchet.db";
  std::filesystem::path plugins = "plugins";
  int workers = 8;
  microseconds busy_timeout = std::chrono::seconds(5);
  microseconds lease = std::chrono::seconds(30);
  microseconds heartbeat = std::chrono::seconds(10);
  microseconds park_threshold = std::chrono::milliseconds(50);
  microseconds poll_interval = std::chrono::milliseconds(200);
  microseconds shutdown_grace = std::chrono::seconds(10);
  int max_lease_expiries = 3;  // a job is dead once its process crashed this often while it ran alone
  // How often the plugin folder is rescanned for new and replaced files
  // while the engine runs; zero: only at start.
  microseconds plugin_rescan = std::chrono::seconds(2);
  // [engine.sqlite] and [engine.postgres]: read by that backend only.
  bool sqlite_synchronous_full = false;  // PRAGMA synchronous=FULL instead of NORMAL
  microseconds postgres_connect_timeout = std::chrono::seconds(10);
};

// The dashboard of `ratchet web` and `ratchet run --web`; the command line
// overrides each.
struct WebSpec {
  std::string listen = "127.0.0.1:8077";
  std::string token;  // from the environment only; empty: a one-time login link
  bool read_only = false;
};

struct Config {
  std::filesystem::path file;  // the file this came from; empty when built in code
  EngineSpec engine;
  WebSpec web;
  std::map<std::string, PluginSpec> plugins;
  std::map<std::string, JobTypeSpec> jobs;
  // Key paths outside plugin settings and step args (e.g. "engine.database")
  // whose value came from ${ENV}; summaries mask them like secrets.
  std::set<std::string> env_keys;
  // Every value substituted for a ${NAME} anywhere in the file, also where it
  // is only part of a longer string (a key inside a URL template): the
  // engine masks each of them in whatever it prints, logs or stores.
  std::set<std::string> secret_values;

  // The policy for one operation: the override if declared, else the plugin's.
  const CallPolicy& policy_for(const std::string& plugin, const std::string& operation) const;
};

using ConfigPtr = std::shared_ptr<const Config>;

}  // namespace ratchet::config
