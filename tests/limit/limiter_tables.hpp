// Test helper: a temporary SQLite database holding the limiter tables, made
// by the store's own migration, removed when the helper goes away.
#pragma once

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "limit/database_limiter.hpp"
#include "store/open_store.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"

namespace ratchet::limit::testing {

class LimiterTables {
 public:
  LimiterTables() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("ratchet-limit-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".db");
    std::filesystem::remove(path_);
    // The store's own migration creates the tables.
    store::StoreOptions o;
    o.database = path_.string();
    auto created = store::open_store(o);
    if (!created) throw std::runtime_error(created.error().to_string());
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
  ConnectionFactory connect() const { return store::sqlite_limiter_tables(path_, std::chrono::seconds(5)); }
  // (WAL commits do not wait for fsync, so thousands of decisions stay quick.)
  ConnectionFactory fast_connect() const { return connect(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ratchet::limit::testing
