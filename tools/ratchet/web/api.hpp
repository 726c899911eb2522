// The JSON API of the dashboard (`/api/v1/`, docs/web.md), as functions of
// an engine and a request's parameters: the server (web_server.hpp) routes
// to them and sends what they return. The shapes are those of the CLI's
// --json output (job_view.hpp).
//
// Thread-safety: as the engine's API, which they call.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ratchet/engine.hpp"
#include "web/request_input.hpp"

namespace ratchet::cli::web {

// The minutes of activity (Engine::activity) the overview charts, kept
// between polls: a job's end is counted in the minute it is written, so
// only the latest minutes change, and the whole hour is read again once a
// minute (a purge elsewhere shows within it). Thread-safe.
class ActivityCache {
 public:
  [[nodiscard]] Result<std::vector<MinuteActivity>> read(Engine& engine, TimePoint first, TimePoint now);
  // The next read reads the whole hour (after a purge here).
  void clear();

 private:
  std::mutex mu_;
  std::map<TimePoint, MinuteActivity> minutes_;
  TimePoint first_{};
  TimePoint whole_read_{};
};

// `cache`: null reads every minute from the database.
Reply overview(Engine& engine, TimePoint now, ActivityCache* cache = nullptr);
Reply list_jobs(Engine& engine, const Params& params);
Reply show_job(Engine& engine, const std::string& id);
Reply retry_job(Engine& engine, const std::string& id);
Reply cancel_job(Engine& engine, const std::string& id);
// Bodies are the request's text, parsed here (a malformed one is a 400).
Reply retry_matching(Engine& engine, const std::string& body);
Reply purge(Engine& engine, const std::string& body);
// Loaded plugins: this process's, or (when it loads none, as `ratchet web`)
// those the latest running engine reported.
Reply plugins(Engine& engine, TimePoint now);
// Declared limits with the latest next free slot the database or a running
// engine knows, and the learned paces and keys the engines reported.
Reply limits(Engine& engine, TimePoint now);

// Engine reports of the last hour (none when the database cannot be read).
std::vector<EngineReport> engine_reports(Engine& engine);
std::vector<LimiterInfo> merged_limits(Engine& engine, const std::vector<EngineReport>& reports,
                                       TimePoint now);
// Calls per plugin over the running engines' reports.
std::vector<PluginCallStats> summed_calls(const std::vector<EngineReport>& reports, TimePoint now);

}  // namespace ratchet::cli::web
