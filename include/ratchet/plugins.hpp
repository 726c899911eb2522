// What an engine opened from a config file shows about its plugins and the
// decorators around them: loaded plugins and refused files, each limiter
// with its next free slot, and call counters, waits and step durations per
// plugin.
//
// Plain values: copy them freely between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ratchet/clock.hpp"

namespace ratchet {

struct PluginInfo {
  std::string name;
  std::string version;
  std::filesystem::path file;
  std::vector<std::string> operations;
  bool configured = false;  // the config has a [plugin.NAME] section
};

struct PluginLoadFailure {
  std::filesystem::path file;
  std::string reason;
};

struct PluginReport {
  std::filesystem::path folder;
  std::vector<PluginInfo> loaded;
  std::vector<PluginLoadFailure> failed;
};

struct LimiterInfo {
  std::string plugin;
  std::string operation;  // empty: the plugin's own limit, shared by its operations
  std::string declared;   // "10/1s sliding window", or "learned: ..." for the pace learned from replies
  TimePoint next_free;    // the earliest start a new call would get
  // A keyed limit (`key = "{{args.account}}"`) lists one row with its number
  // of keys ("12 keys"), then one per key that waits now, with that key: a
  // job argument's value as is, a key read from settings as a keyed hash.
  std::string key{};
};

// Durations counted into buckets, the way a Prometheus histogram shows them.
struct DurationHistogram {
  std::vector<Duration> bounds{};  // upper bounds of the buckets, ascending
  // Observations per bucket, not cumulative: counts[i] took more than
  // bounds[i - 1] and at most bounds[i]. It has bounds.size() + 1 entries;
  // the last counts those longer than every bound.
  std::vector<std::uint64_t> counts{};
  Duration sum{};           // of every observation
  std::uint64_t count = 0;  // observations: the sum of `counts`
};

// How long the step calls of one plugin operation took.
struct OperationDurations {
  std::string operation;
  DurationHistogram durations;
};

// What this engine's step calls of one plugin did since the engine opened.
// A configured plugin is listed, with each of its operations, before its
// first call; another plugin from its first call on.
struct PluginCallStats {
  std::string plugin;
  std::uint64_t calls = 0;      // plugin calls made; each retry is another call
  std::uint64_t throttled = 0;  // calls answered 429 or throttled
  std::uint64_t retries = 0;    // calls retried after a failure
  std::uint64_t parks = 0;      // times a step parked waiting for a slot, a backoff or a circuit
  // Steps parked at this moment: their last call parked and they have not
  // come back, and their job neither ended nor moved on to another attempt or
  // another process.
  std::uint64_t parked_now = 0;
  // Time steps spent waiting for a limiter slot (a rate or concurrency
  // limit), in place or parked, waits still going on included.
  Duration limiter_wait{};
  // Per operation called, by name: each step call from its first admission
  // in this engine to its final outcome (output or failure), with its
  // waits, parks and retries. A step whose job ends while it is parked, or
  // whose call the engine's stop interrupts, has no outcome and is not counted.
  std::vector<OperationDurations> step_durations{};
};

// What a running engine last wrote to its database of what only it knows:
// its plugins, its limiters (with learned paces and keys) and its calls.
// Tools that read the database without loading plugin code (`ratchet web`)
// show these. An engine writes its report every few seconds while it runs
// (Engine::start to Engine::stop), and a last one, not running, as it stops.
struct EngineReport {
  std::string worker;  // the engine's worker id
  TimePoint updated_at;
  bool running = false;
  PluginReport plugins;
  std::vector<LimiterInfo> limits;
  std::vector<PluginCallStats> calls;
  // Per plugin, its calls answered 429 or throttled in each minute of the
  // last hour that had any: (the minute's start, how many).
  struct ThrottledMinute {
    std::string plugin;
    TimePoint minute;
    std::uint64_t throttled = 0;
  };
  std::vector<ThrottledMinute> throttled_per_minute;
};

// Changes to an engine opened from a config file, for this process only.
struct ConfigOverrides {
  std::optional<int> workers;                     // instead of [engine] workers
  std::optional<std::filesystem::path> database;  // instead of [engine] database
  std::shared_ptr<const Clock> clock;             // null: the system clock
  std::string worker_id;                          // empty: "<hostname>:<pid>:<random>"
  std::uint64_t seed = 0;                         // jitter seed; 0: random
};

}  // namespace ratchet
