// An engine's report (ratchet::EngineReport): what only a running engine
// knows (its plugins, limiters with learned paces and keys, calls) written
// to the database every report_interval, so that tools reading the database
// without plugin code (`ratchet web`) show it.
//
// The report is JSON in one row per worker (store: put_report), replaced on
// every write; rows not updated for a day are deleted by the next writer.
// 429s per minute are counted here, from the growth of each plugin's
// throttled count between reports, for the last hour.
//
// Ownership: owned by the Engine's Impl; start() borrows the store and
// clock, which must outlive stop(). Thread-safety: start and stop from Engine::start and
// Engine::stop only (under its scheduler lock).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "ratchet/engine.hpp"
#include "store/store.hpp"

namespace ratchet::runtime {

// The report as stored, and back (nullopt: not a report this version reads).
std::string report_to_json(const EngineReport& report);
std::optional<EngineReport> report_from_json(std::string_view worker, TimePoint updated,
                                             std::string_view text);

class ReportWriter {
 public:
  ReportWriter() = default;
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;
  ~ReportWriter() { stop(); }

  // Writes a report, filled by `fill`, every `interval` from now.
  void start(std::function<void(EngineReport&)> fill, store::Store& store, const Clock& clock,
             std::string worker, Duration interval);
  // Stops writing and writes the last report (running: false). Idempotent.
  void stop();

 private:
  void loop(std::stop_token stop);
  void write(bool running);
  void write_once(bool running);

  std::function<void(EngineReport&)> fill_;
  store::Store* store_ = nullptr;
  const Clock* clock_ = nullptr;
  std::string worker_;
  Duration interval_{};
  // Writer thread only (and stop(), after it joined).
  std::map<std::string, std::uint64_t> throttled_seen_;
  std::map<std::pair<std::string, TimePoint>, std::uint64_t> throttled_minutes_;
  std::chrono::steady_clock::time_point last_try_while_failing_{};
  std::jthread thread_;
};

}  // namespace ratchet::runtime
