// Test helper: a temporary SQLite database holding the limiter tables exactly
// as the store's migration creates them, removed when the helper goes away.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <string>

#include "limit/database_limiter.hpp"

namespace ratchet::limit::testing {

class LimiterTables {
 public:
  LimiterTables() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("ratchet-limit-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".db");
    std::filesystem::remove(path_);
    SQLite::Database db(path_.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode=WAL");
    db.exec(
        "CREATE TABLE limiter_state (key TEXT PRIMARY KEY, tat_us INTEGER, window_start_us INTEGER, "
        "window_count INTEGER, updated_us INTEGER NOT NULL, started_tat_us INTEGER);");
    db.exec("CREATE TABLE limiter_calls (key TEXT NOT NULL, at_us INTEGER NOT NULL);");
    db.exec("CREATE INDEX limiter_calls_key_at ON limiter_calls(key, at_us);");
    db.exec("CREATE TABLE limiter_starts (key TEXT NOT NULL, at_us INTEGER NOT NULL);");
    db.exec("CREATE INDEX limiter_starts_key_at ON limiter_starts(key, at_us);");
    db.exec("CREATE TABLE limiter_journal (owner TEXT NOT NULL, at_us INTEGER NOT NULL);");
    db.exec("CREATE INDEX limiter_journal_owner_at ON limiter_journal(owner, at_us);");
    db.exec(
        "CREATE TABLE limiter_leases (owner TEXT NOT NULL, instance TEXT NOT NULL, until_us INTEGER NOT "
        "NULL, "
        "calls INTEGER NOT NULL, PRIMARY KEY (owner, instance)) WITHOUT ROWID;");
  }
  ~LimiterTables() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::filesystem::remove(path_.string() + suffix, ec);
    }
  }
  LimiterTables(const LimiterTables&) = delete;
  LimiterTables& operator=(const LimiterTables&) = delete;

  const std::filesystem::path& path() const { return path_; }
  ConnectionFactory connect() const { return connect_to(path_, std::chrono::seconds(5)); }

  // A connection that skips fsync, for tests that make thousands of decisions.
  ConnectionFactory fast_connect() const {
    return [path = path_]() -> Result<std::unique_ptr<SQLite::Database>> {
      auto db = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE, 5000);
      db->exec("PRAGMA synchronous=OFF");
      return db;
    };
  }

 private:
  std::filesystem::path path_;
};

}  // namespace ratchet::limit::testing
