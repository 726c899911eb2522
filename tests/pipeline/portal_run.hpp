// Shared set-up of the pipeline tests that run the assembled engine against
// the mock portal server: a scratch folder per run, the [engine] section they
// share, the server started with the portal options under test, the engine
// opened from a config written for that server, and bounded real-time waits.
//
// Failures while setting up are reported as test failures; a run then lacks
// whatever could not be made (check `run.engine` before using it).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "mock_portal/server.hpp"
#include "ratchet/engine.hpp"
#include "ratchet_test_paths.hpp"
#include "temp_dir.hpp"

namespace ratchet::testing {

// One rate-limit dialect (or fault) of the server; `name` ends the test's name.
struct DialectCase {
  std::string name;
  mock_portal::PortalOptions options;
};

// gtest prints the case by its name, not as bytes.
inline void PrintTo(const DialectCase& c, std::ostream* os) { *os << c.name; }

inline std::string dialect_case_name(const ::testing::TestParamInfo<DialectCase>& param) {
  return param.param.name;
}

// A portal speaking `dialect` that admits `limit` requests per `window`.
inline mock_portal::PortalOptions limited(mock_portal::Dialect dialect, std::int64_t limit,
                                          std::chrono::milliseconds window) {
  mock_portal::PortalOptions o;
  o.dialect = dialect;
  o.limit = limit;
  o.window = window;
  return o;
}

// The header dialects: X-RateLimit with a Unix and a delta reset and IETF
// RateLimit on fixed windows of `limit` per `window`; Retry-After in seconds
// and as an HTTP date on a token bucket of `bucket_limit` per `bucket_window`.
inline std::vector<DialectCase> header_dialect_cases(std::int64_t limit, std::chrono::milliseconds window,
                                                     std::int64_t bucket_limit,
                                                     std::chrono::milliseconds bucket_window) {
  using mock_portal::Dialect;
  std::vector<DialectCase> cases;
  cases.push_back({"XRateLimitUnixReset", limited(Dialect::kFixedWindow, limit, window)});
  auto delta = limited(Dialect::kFixedWindow, limit, window);
  delta.reset_style = mock_portal::ResetStyle::kDeltaSeconds;
  cases.push_back({"XRateLimitDeltaReset", delta});
  cases.push_back({"RetryAfterSeconds", limited(Dialect::kTokenBucket, bucket_limit, bucket_window)});
  auto date = limited(Dialect::kTokenBucket, bucket_limit, bucket_window);
  date.retry_after_style = mock_portal::RetryAfterStyle::kHttpDate;
  cases.push_back({"RetryAfterHttpDate", date});
  cases.push_back({"IetfRateLimit", limited(Dialect::kIetf, limit, window)});
  return cases;
}

// A fresh folder on a memory file system where there is one (these tests
// count 429s and parks, not the disk's stalls: temp_dir.hpp), removed with
// the object.
class ScratchDir {
 public:
  ScratchDir() = default;
  explicit ScratchDir(const std::string& name)
      : path_(memory_temp_base() / ("ratchet-pipeline-" + std::to_string(::getpid()) + "-" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir& operator=(ScratchDir&& other) noexcept {
    std::swap(path_, other.path_);
    return *this;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The [engine] section of the pipeline tests: the database in the config's
// folder, the build tree's plugins, and a park threshold and poll interval
// short enough that a server's waits show up as parks within a test.
inline std::string engine_section(int workers = 8) {
  return "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" RATCHET_PLUGIN_DIR "\"\nworkers = " +
         std::to_string(workers) + "\npark_threshold = \"20ms\"\npoll_interval = \"20ms\"\n\n";
}

// The server, the engine and the jobs of one test. Members are destroyed
// engine first, folder last.
struct PortalRun {
  ScratchDir dir;
  std::unique_ptr<mock_portal::MockPortalServer> server;
  std::unique_ptr<Engine> engine;
  std::vector<JobId> ids;
};

using ConfigWriter = std::function<std::string(const mock_portal::MockPortalServer&)>;

// Starts the server with `options`, writes `config(server)` as ratchet.toml
// into a fresh folder named after `name`, and opens the engine from it.
inline PortalRun open_run(const std::string& name, mock_portal::ServerOptions options,
                          const ConfigWriter& config, ConfigOverrides overrides = {}) {
  PortalRun run;
  run.dir = ScratchDir(name);
  auto server = mock_portal::MockPortalServer::start(std::move(options));
  EXPECT_TRUE(server.has_value()) << server.error().to_string();
  if (!server) return run;
  run.server = std::move(*server);
  const auto file = run.dir.path() / "ratchet.toml";
  std::ofstream(file) << config(*run.server);
  auto engine = Engine::open_config(file, std::move(overrides));
  EXPECT_TRUE(engine.has_value()) << engine.error().to_string();
  if (engine) run.engine = std::move(*engine);
  return run;
}

// "film 0", "film 1", ...: movie names the server rates.
inline std::vector<std::string> film_names(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back("film " + std::to_string(i));
  return names;
}

// Enqueues one job of `type` with args {"name": NAME} per name into `run.ids`.
inline void enqueue_films(PortalRun& run, const std::string& type, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    auto id = run.engine->enqueue(type, {{"name", name}});
    EXPECT_TRUE(id.has_value()) << id.error().to_string();
    if (id) run.ids.push_back(*id);
  }
}

// Starts the engine, waits (real time) until no job is pending or running,
// and stops the engine.
inline void run_to_end(PortalRun& run, std::chrono::seconds timeout) {
  EXPECT_TRUE(run.engine->start().has_value());
  auto drained = run.engine->drain(timeout);
  EXPECT_TRUE(drained.has_value()) << drained.error().to_string();
  run.engine->stop();
}

// Enqueues the films and runs them to the end.
inline void run_films(PortalRun& run, const std::string& type, const std::vector<std::string>& names,
                      std::chrono::seconds timeout) {
  enqueue_films(run, type, names);
  run_to_end(run, timeout);
}

// Polls `done` until it holds or `timeout` (real time) passes.
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// The engine's call counters of `plugin`; all zero before its first call.
inline PluginCallStats call_stats_of(Engine& engine, const std::string& plugin) {
  for (auto& s : engine.call_stats()) {
    if (s.plugin == plugin) return s;
  }
  PluginCallStats none;
  none.plugin = plugin;
  return none;
}

}  // namespace ratchet::testing
