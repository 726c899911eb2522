#include "store/open_store.hpp"

#include "common/database_url.hpp"

#include "store/postgres/pg_limiter_tables.hpp"
#include "store/postgres/pg_store.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace ratchet::store {
namespace {

DatabaseOptions sqlite_options(const StoreOptions& o) {
  DatabaseOptions d;
  d.path = o.database;
  d.synchronous_full = o.sqlite_synchronous_full;
  d.busy_timeout = o.busy_timeout;
  d.clock = o.clock;
  return d;
}

std::string_view scheme_of(std::string_view database) {
  const auto colon = database.find("://");
  return colon == std::string_view::npos ? std::string_view() : database.substr(0, colon);
}

bool is_postgres(std::string_view database) {
  const std::string_view scheme = scheme_of(database);
  return scheme == "postgresql" || scheme == "postgres";
}

Error unsupported_url(std::string_view database) {
  return Error::database("database " + std::string(scheme_of(database)) +
                         "://...: not a kind of database ratchet knows; use a file path (e.g. database = "
                         "\"ratchet.db\") or a postgresql:// URL");
}

pg::PgStoreOptions postgres_options(const StoreOptions& o) {
  pg::PgStoreOptions p;
  p.connect.url = o.database;
  p.connect.connect_timeout = o.postgres_connect_timeout;
  p.busy_timeout = o.busy_timeout;
  p.clock = o.clock;
  return p;
}

}  // namespace

bool is_server_url(std::string_view database) { return common::is_server_url(database); }

Result<std::unique_ptr<Store>> open_store(const StoreOptions& options) {
  if (is_postgres(options.database)) {
    auto store = pg::PgStore::open(postgres_options(options));
    if (!store) return fail(store.error());
    return std::unique_ptr<Store>(std::move(*store));
  }
  if (is_server_url(options.database)) return fail(unsupported_url(options.database));
  auto store = SqliteStore::open(sqlite_options(options));
  if (!store) return fail(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

LimiterTablesFactory limiter_tables_for(const StoreOptions& options) {
  if (is_postgres(options.database)) {
    const pg::PgStoreOptions pg_options = postgres_options(options);
    return pg::pg_limiter_tables(pg_options.connect, pg_options.busy_timeout);
  }
  if (is_server_url(options.database)) {
    return [database = options.database]() -> Result<std::unique_ptr<LimiterTables>> {
      return fail(unsupported_url(database));
    };
  }
  return sqlite_limiter_tables(options.database, options.busy_timeout);
}

}  // namespace ratchet::store
