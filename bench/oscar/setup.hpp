// What one run of the oscar benchmark is: the five mock portals with their
// limits and header dialects, where the server listens, how many "rate a
// movie" jobs run on how many workers, and what every strategy returns.
//
// A BenchSetup holds everything a strategy needs, so a strategy is a plain
// function `RunResult run_x(const BenchSetup&)`: the harness (harness.hpp)
// resets the server before each one and reads the server's counts after it.
// The engine row (engine_strategy.cpp) also writes its TOML configuration
// from the setup (engine_toml), declaring the portals' limits or not.
//
// Ownership: plain values. Thread-safety: a BenchSetup is read-only while
// strategies run and may be read from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mock_portal/options.hpp"
#include "ratchet/status.hpp"

namespace ratchet::bench {

// imdb, rotten_tomatoes, sify, netflix, amazon_prime: a job calls each once.
inline constexpr std::size_t kPortals = 5;

struct PortalSetup {
  std::string name;                    // as the server, the plugin and the TOML name it
  std::string dialect;                 // how the portal speaks about its limit, for the table
  mock_portal::PortalOptions options;  // dialect, limit, window and burst the server enforces
  std::string url;                     // "http://127.0.0.1:PORT/imdb"; the plugin's base_url

  // Calls per second the portal admits in the long run (limit / window).
  double rate() const;
  // The most requests a client that keeps the limit can send in any
  // interval of one window (what the server's max_in_window is checked
  // against): `limit` for the window dialects; for a token bucket, a full
  // bucket plus what refills during the window. The server measures sliding
  // windows, so a client that obeys only its fixed windows may exceed this
  // across a window boundary without ever being throttled.
  std::int64_t allowed_in_window() const;
};

// How the engine row declares the portals' limits in its TOML.
enum class EngineLimits {
  kDeclared,  // [[plugin.X.limit]] matching what the server enforces
  kLearned,   // no limit at all: the engine paces from the servers' headers and 429s
};

struct BenchSetup {
  std::string server_url;                                // "http://127.0.0.1:PORT"
  std::array<PortalSetup, kPortals> portals;             // in mock_portal::portal_names() order
  int jobs = 200;                                        // N
  int workers = 16;                                      // worker threads of every strategy and of the engine
  std::vector<std::string> movies;                       // the movie each job rates; jobs entries
  std::chrono::seconds deadline{120};                    // a strategy still running after this is cut off
  std::uint64_t seed = 42;                               // jitter and random sleeps of the strategies
  EngineLimits engine_limits = EngineLimits::kDeclared;  // read by run_engine only
  std::filesystem::path plugin_dir;                      // where the build put the portal plugins
  std::filesystem::path work_dir;                        // scratch folder for the engine's files; exists

  // The theoretical makespan: N divided by the slowest portal's rate.
  double bound_seconds() const;

  // The engine's configuration for this setup: [engine] with `database` and
  // the plugin folder, one [plugin.X] per portal pointing at the server
  // (with its limit when engine_limits is kDeclared), and [job.rate_movie]
  // with one step per portal taking args.name.
  std::string engine_toml(const std::filesystem::path& database) const;
  // Writes engine_toml(database) to `file`.
  Status write_engine_toml(const std::filesystem::path& file, const std::filesystem::path& database) const;
};

// The five portals at `scale` times their base rates (sify, the slowest,
// admits 40 calls a second at scale 1, so N = 200 has a 5 s bound; the
// token buckets hold a sixth of their rate). URLs stay empty until the
// server runs.
std::array<PortalSetup, kPortals> default_portals(double scale);

// "movie-0000", "movie-0001", ...: distinct names, safe in a URL path.
std::vector<std::string> movie_names(int jobs);

// One job's outcome: the rating each portal gave (by portal index), and
// whether the job finished with all five.
struct JobRecord {
  std::array<std::optional<double>, kPortals> ratings{};
  bool completed = false;
};

// What a strategy reports; the harness adds what the server counted.
struct RunResult {
  bool available = true;        // false: the strategy is not in this build (see note)
  std::string note;             // why not available, or anything the row should say
  double makespan_s = 0;        // from the first call until the last job completed (or the cut-off)
  std::int64_t parks = -1;      // the engine's jobs parked this often in all; -1: the strategy does not park
  std::vector<JobRecord> jobs;  // one per job, in setup.movies order
};

}  // namespace ratchet::bench
