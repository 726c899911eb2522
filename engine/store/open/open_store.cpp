#include "store/open_store.hpp"

#include "store/sqlite/sqlite_limiter_tables.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace ratchet::store {
namespace {

DatabaseOptions sqlite_options(const StoreOptions& o) {
  DatabaseOptions d;
  d.path = o.database;
  d.synchronous_full = o.synchronous_full;
  d.busy_timeout = o.busy_timeout;
  d.clock = o.clock;
  return d;
}

std::string_view scheme_of(std::string_view database) {
  const auto colon = database.find("://");
  return colon == std::string_view::npos ? std::string_view() : database.substr(0, colon);
}

Error unsupported_url(std::string_view database) {
  const std::string_view scheme = scheme_of(database);
  if (scheme == "postgresql" || scheme == "postgres") {
    return Error::database("database " + std::string(scheme) +
                           "://...: this ratchet does not yet store jobs in PostgreSQL; use a file path "
                           "(e.g. database = \"ratchet.db\")");
  }
  return Error::database("database " + std::string(scheme) +
                         "://...: not a kind of database ratchet knows; use a file path (e.g. database = "
                         "\"ratchet.db\") or a postgresql:// URL");
}

}  // namespace

bool is_server_url(std::string_view database) {
  const std::string_view scheme = scheme_of(database);
  if (scheme.empty()) return false;
  for (char c : scheme) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Result<std::unique_ptr<Store>> open_store(const StoreOptions& options) {
  if (is_server_url(options.database)) return fail(unsupported_url(options.database));
  auto store = SqliteStore::open(sqlite_options(options));
  if (!store) return fail(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

LimiterTablesFactory limiter_tables_for(const StoreOptions& options) {
  if (is_server_url(options.database)) {
    return [database = options.database]() -> Result<std::unique_ptr<LimiterTables>> {
      return fail(unsupported_url(database));
    };
  }
  return sqlite_limiter_tables(options.database, options.busy_timeout);
}

}  // namespace ratchet::store
