// Test helper: a fresh database of one store backend (tests/store/
// backends.hpp) holding the limiter tables, made by the store's own
// migration, and connections to them as the engine opens them
// (limiter_tables_for). The SQLite file is removed with the helper; a
// PostgreSQL schema is left to the throw-away cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "backends.hpp"
#include "limit/database_limiter.hpp"
#include "store/open_store.hpp"
#include "temp_dir.hpp"

namespace ratchet::limit::testing {

class LimiterTables {
 public:
  explicit LimiterTables(const store::testing::Backend& backend) : backend_(backend) {
    options_.database = backend.fresh_database(dir_);
    options_.busy_timeout = std::chrono::seconds(5);
    // The store's own migration creates the tables.
    auto created = store::open_store(options_);
    if (!created) throw std::runtime_error(created.error().to_string());
  }
  LimiterTables(const LimiterTables&) = delete;
  LimiterTables& operator=(const LimiterTables&) = delete;

  const std::string& database() const { return options_.database; }
  const store::testing::Backend& backend() const { return backend_; }
  ConnectionFactory connect() const { return store::limiter_tables_for(options_); }

  // Entries of `log` under `key`, read through the backend's LimiterTables.
  std::int64_t entries(store::LimiterLog log, const std::string& key) const {
    auto db = connect()();
    if (!db) throw std::runtime_error(db.error().to_string());
    std::int64_t n = -1;
    auto st = (*db)->transact(key, "count the entries", [&] {
      n = (*db)->count_in(log, key, std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max());
    });
    if (!st) throw std::runtime_error(st.error().to_string());
    return n;
  }

 private:
  store::testing::Backend backend_;
  ratchet::testing::TempDir dir_;
  store::StoreOptions options_;
};

}  // namespace ratchet::limit::testing
