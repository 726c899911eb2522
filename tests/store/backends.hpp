// The store conformance suite's backends. Every case written as
// TEST_P(<suite>, ...) over StoreBackendTest (or over ::testing::TestWithParam
// <Backend>) runs once against each backend listed here, through the same
// open_store() the engine uses, so a backend passes the suite or is not one.
// A new backend adds one entry.
//
// A case speaks to the store through Store, JobStore and LimiterTables. The
// few things no interface shows (a job's quarantine columns, the schema's
// version, a database someone else made) go through the hooks below, which
// run SQL on the backend's own connection: a case names a table as
// b.table("jobs"), so it reads the same on every backend.
#pragma once

#include <gtest/gtest.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fresh_schema.hpp"
#include "pg_options.hpp"
#include "store/open_store.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/pg_schema.hpp"
#include "store/sqlite/database.hpp"
#include "temp_dir.hpp"

namespace ratchet::store::testing {

// A database that is not ratchet's, as the backend may meet one.
struct Foreign {
  std::string what;      // for messages
  std::string database;  // the database setting naming it
};

struct Backend {
  std::string name;
  // The database setting of a fresh, empty database for one test.
  std::function<std::string(const ratchet::testing::TempDir&)> fresh_database;
  // How this backend names ratchet's table `name` ("jobs", "limiter_calls").
  std::string table_prefix;
  // Runs `sql` (one or more statements) on the database, outside the store.
  std::function<void(const std::string& database, const std::string& sql)> exec;
  // The first column of the first row of `sql`, as text ("" when no row).
  std::function<std::string(const std::string& database, const std::string& sql)> scalar;
  // The schema version this build writes, and the one a database holds.
  int current_version = 0;
  std::function<int(const std::string& database)> stored_version;
  // Marks the database as written by a ratchet whose schema is `version`.
  std::function<void(const std::string& database, int version)> set_version;
  // Databases someone else made, each created here (in `dir` or on the server).
  std::function<std::vector<Foreign>(const ratchet::testing::TempDir&)> foreign_databases;
  // Everything a refusal must leave as it was (the file's bytes; the schema's tables and rows).
  std::function<std::string(const std::string& database)> snapshot;
  // A database setting that names nothing that can be opened.
  std::string unreachable;

  std::string table(const std::string& base) const { return table_prefix + base; }
};

namespace detail {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "(no file)";
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void sqlite_exec(const std::string& database, const std::string& sql) {
  SQLite::Database db(database, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec(sql);
}

inline std::string sqlite_scalar(const std::string& database, const std::string& sql) {
  SQLite::Database db(database, SQLite::OPEN_READONLY);
  SQLite::Statement q(db, sql);
  return q.executeStep() ? q.getColumn(0).getString() : std::string();
}

inline store::pg::Connection pg_connect(const std::string& database) {
  auto c = store::pg::connect(ratchet::testing::pg_options(database));
  if (!c) throw std::runtime_error(c.error().to_string());
  return std::move(*c);
}

inline void pg_exec(const std::string& database, const std::string& sql) {
  auto c = pg_connect(database);
  if (auto r = c.exec(sql); !r) throw std::runtime_error(r.error().to_string());
}

inline std::string pg_scalar(const std::string& database, const std::string& sql) {
  auto c = pg_connect(database);
  auto r = c.exec(sql);
  if (!r) throw std::runtime_error(r.error().to_string());
  return r->size() > 0 ? std::string(r->get_text(0, 0)) : std::string();
}

// An application's own tables, with a row each.
constexpr const char* kAppTables =
    "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
    "INSERT INTO users (id, name) VALUES (1, 'ada');"
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER);"
    "INSERT INTO orders (id, user_id) VALUES (7, 1);";

inline std::vector<Foreign> sqlite_foreign(const ratchet::testing::TempDir& dir) {
  std::vector<Foreign> out;
  const std::string text = dir.file("notes.txt").string();
  {
    std::ofstream f(text);
    for (int i = 0; i < 200; ++i) f << "this is not a database, it is a text file with some lines\n";
  }
  out.push_back({"a text file", text});
  const std::string app = dir.file("app.db").string();
  sqlite_exec(app, kAppTables);
  out.push_back({"an application's SQLite file", app});
  const std::string clash = dir.file("clash.db").string();
  sqlite_exec(clash, std::string(kAppTables) + "CREATE TABLE jobs (id INTEGER, what TEXT);" +
                         "INSERT INTO jobs VALUES (1, 'mine');");
  out.push_back({"an SQLite file with a jobs table of its own", clash});
  return out;
}

inline std::vector<Foreign> pg_foreign(const ratchet::testing::TempDir&) {
  // PostgreSQL shares a schema with an application's tables (README), so
  // what is not ratchet's is a table under one of its names.
  std::vector<Foreign> out;
  const std::string jobs = ratchet::testing::fresh_postgres_schema();
  pg_exec(jobs, std::string(kAppTables) + "CREATE TABLE ratchet_jobs (id int, what text);" +
                    "INSERT INTO ratchet_jobs VALUES (1, 'mine');");
  out.push_back({"a schema with a ratchet_jobs table of its own", jobs});
  const std::string limits = ratchet::testing::fresh_postgres_schema();
  pg_exec(limits, std::string(kAppTables) + "CREATE TABLE ratchet_limiter_state (key text, v int);" +
                      "INSERT INTO ratchet_limiter_state VALUES ('k', 1);");
  out.push_back({"a schema with a ratchet_limiter_state table of its own", limits});
  return out;
}

// The schema's tables with their columns and rows, as text.
inline std::string pg_snapshot(const std::string& database) {
  auto c = pg_connect(database);
  auto tables = c.exec(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1");
  if (!tables) throw std::runtime_error(tables.error().to_string());
  std::string out;
  for (int i = 0; i < tables->size(); ++i) {
    const std::string t(tables->get_text(i, 0));
    auto rows = c.exec("SELECT COALESCE(string_agg(x::text, ';' ORDER BY x::text), '') FROM \"" + t + "\" x");
    if (!rows) throw std::runtime_error(rows.error().to_string());
    out += t + ": " + std::string(rows->get_text(0, 0)) + "\n";
  }
  return out;
}

}  // namespace detail

inline std::vector<Backend> backends() {
  Backend sqlite;
  sqlite.name = "sqlite";
  sqlite.fresh_database = [](const ratchet::testing::TempDir& dir) { return dir.file("jobs.db").string(); };
  sqlite.exec = detail::sqlite_exec;
  sqlite.scalar = detail::sqlite_scalar;
  sqlite.current_version = store::schema_version();
  sqlite.stored_version = [](const std::string& db) {
    return std::stoi(detail::sqlite_scalar(db, "PRAGMA user_version"));
  };
  sqlite.set_version = [](const std::string& db, int v) {
    detail::sqlite_exec(db, "PRAGMA user_version=" + std::to_string(v));
  };
  sqlite.foreign_databases = detail::sqlite_foreign;
  sqlite.snapshot = [](const std::string& db) {
    // The file, and whether SQLite left a write-ahead log beside it.
    return detail::slurp(db) + "|wal:" + detail::slurp(db + "-wal");
  };
  sqlite.unreachable = "/nonexistent-dir/ratchet.db";

  Backend postgres;
  postgres.name = "postgres";
  postgres.fresh_database = [](const ratchet::testing::TempDir&) {
    return ratchet::testing::fresh_postgres_schema();
  };
  postgres.table_prefix = "ratchet_";
  postgres.exec = detail::pg_exec;
  postgres.scalar = detail::pg_scalar;
  postgres.current_version = store::pg::pg_schema_version();
  postgres.stored_version = [](const std::string& db) {
    return std::stoi(detail::pg_scalar(db, "SELECT max(version) FROM ratchet_schema"));
  };
  postgres.set_version = [](const std::string& db, int v) {
    detail::pg_exec(db, "INSERT INTO ratchet_schema (version) VALUES (" + std::to_string(v) + ")");
  };
  postgres.foreign_databases = detail::pg_foreign;
  postgres.snapshot = detail::pg_snapshot;
  postgres.unreachable = "postgresql://ratchet@127.0.0.1:1/ratchet?connect_timeout=2";

  return {sqlite, postgres};
}

inline void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }

// A test with a fresh database of its backend, open as `store_`.
class StoreBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    database_ = GetParam().fresh_database(dir_);
    StoreOptions o;
    o.database = database_;
    auto s = open_store(o);
    ASSERT_TRUE(s) << s.error().to_string();
    store_ = std::move(*s);
  }

  const Backend& backend() const { return GetParam(); }
  // COUNT(*) of the backend's jobs table WHERE `where`.
  int count_jobs(const std::string& where) const {
    return std::stoi(
        backend().scalar(database_, "SELECT COUNT(*) FROM " + backend().table("jobs") + " WHERE " + where));
  }

  ratchet::testing::TempDir dir_;
  std::string database_;
  std::unique_ptr<Store> store_;
};

}  // namespace ratchet::store::testing
