// Choosing the store's backend from the database setting: a path opens the
// embedded SQLite file (the default, no server); a URL of the form
// postgresql://user@host[:port]/db names a server database. Where a third
// backend would go: a folder beside store/sqlite/ implementing Store,
// JobStore and LimiterTables, and one branch here.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"
#include "store/limiter_tables.hpp"
#include "store/store.hpp"

namespace ratchet::store {

struct StoreOptions {
  std::string database;  // a file path, or a server URL
  std::chrono::milliseconds busy_timeout{5000};
  // Read by one backend each: SQLite's PRAGMA synchronous=FULL, and how
  // long one PostgreSQL connection attempt may take.
  bool sqlite_synchronous_full = false;
  std::chrono::seconds postgres_connect_timeout{10};
  // The clock leases of writes are read on; null: the system clock.
  std::shared_ptr<const Clock> clock;
};

// Whether `database` names a server (a URL with a scheme) rather than a file.
bool is_server_url(std::string_view database);

[[nodiscard]] Result<std::unique_ptr<Store>> open_store(const StoreOptions& options);

// Connections to the limiter state of the database `options` names, opened
// when a database-scope limiter or a start journal needs one.
LimiterTablesFactory limiter_tables_for(const StoreOptions& options);

}  // namespace ratchet::store
