// What an engine opened from a config file shows about its plugins and the
// decorators around them: loaded plugins and refused files, each limiter
// with its next free slot, and call counters per plugin.
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
};

struct PluginCallStats {
  std::string plugin;
  std::uint64_t calls = 0;      // plugin calls made
  std::uint64_t throttled = 0;  // calls answered 429 or throttled
  std::uint64_t retries = 0;    // calls retried after a failure
  std::uint64_t parks = 0;      // steps parked waiting for a slot, a backoff or a circuit
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
