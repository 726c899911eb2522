#include "store/sqlite/sqlite_store.hpp"

#include <sqlite3.h>

#include <SQLiteCpp/Exception.h>

#include "store/sqlite/sqlite_job_store.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"

namespace ratchet::store {
namespace {

int sqlite_code(const std::exception& e) {
  const auto* se = dynamic_cast<const SQLite::Exception*>(&e);
  return se == nullptr ? -1 : se->getErrorCode() & 0xff;
}

// Failures that waiting for a lock does not cure.
bool is_disk_failure(int code) {
  return code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_READONLY || code == SQLITE_CANTOPEN;
}

void run_prepared(SQLite::Statement& s) {
  s.reset();
  s.exec();
}

}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const DatabaseOptions& options) {
  auto writer = open_database(options);
  if (!writer) return fail(writer.error());
  DatabaseOptions read_options = options;
  read_options.migrate = false;
  auto reader = open_database(read_options);
  if (!reader) return fail(reader.error());
  return std::unique_ptr<SqliteStore>(new SqliteStore(options, std::move(*writer), std::move(*reader)));
}

SqliteStore::SqliteStore(DatabaseOptions options, std::unique_ptr<SQLite::Database> writer,
                         std::unique_ptr<SQLite::Database> reader)
    : GroupCommitStore(options.clock, options.busy_timeout),
      options_(std::move(options)),
      wdb_(std::move(writer)),
      wstore_(std::make_unique<SqliteJobStore>(*wdb_)),
      rdb_(std::move(reader)),
      rstore_(std::make_unique<SqliteJobStore>(*rdb_)),
      opened_(options_.path) {
  savepoint_ = std::make_unique<SQLite::Statement>(*wdb_, "SAVEPOINT op");
  release_ = std::make_unique<SQLite::Statement>(*wdb_, "RELEASE op");
  rollback_to_ = std::make_unique<SQLite::Statement>(*wdb_, "ROLLBACK TO op");
  start_writer();
}

SqliteStore::~SqliteStore() {
  stop_writer();
  // Statements before their connections.
  wstore_.reset();
  rstore_.reset();
  savepoint_.reset();
  release_.reset();
  rollback_to_.reset();
}

LimiterTablesFactory SqliteStore::limiter_tables() const {
  return sqlite_limiter_tables(options_.path, options_.busy_timeout);
}

SqliteStore::Failure SqliteStore::failure(std::string_view doing, const std::exception& e) const {
  const int code = sqlite_code(e);
  Failure f{code < 0 ? Error::internal(std::string("a database write failed: ") + e.what())
                     : database_error(options_.path, doing, e)};
  // SQLITE_PROTOCOL: a WAL lock race lost past SQLite's own tries, as while
  // another process recovers the WAL index after a crash; SQLite's advice
  // is to try again, as for a lock.
  f.transient = code == SQLITE_BUSY || code == SQLITE_LOCKED || code == SQLITE_PROTOCOL;
  f.disk = is_disk_failure(code);
  return f;
}

std::optional<SqliteStore::Failure> SqliteStore::begin_transaction() {
  if (auto gone = opened_.replaced()) {
    Failure f{*gone};
    f.disk = true;  // waiting does not cure it
    return f;
  }
  try {
    wdb_->exec("BEGIN IMMEDIATE");
    return std::nullopt;
  } catch (const std::exception& e) {
    return failure("starting a write", e);
  }
}

std::optional<SqliteStore::Failure> SqliteStore::run_in_savepoint(
    const std::function<void(JobStore&)>& body) {
  try {
    run_prepared(*savepoint_);
    body(*wstore_);
    run_prepared(*release_);
    return std::nullopt;
  } catch (const std::exception& e) {
    Failure f = failure("writing", e);
    try {
      run_prepared(*rollback_to_);
      run_prepared(*release_);
    } catch (const std::exception&) {
      // The transaction itself is gone; the commit reports it.
    }
    return f;
  }
}

void SqliteStore::rollback_transaction() {
  try {
    wdb_->exec("ROLLBACK");
  } catch (const std::exception&) {
    // Nothing left to roll back.
  }
}

std::optional<SqliteStore::Failure> SqliteStore::commit_transaction() {
  try {
    wdb_->exec("COMMIT");
    return std::nullopt;
  } catch (const std::exception& e) {
    Failure f = failure("committing", e);
    try {
      wdb_->exec("ROLLBACK");
    } catch (const std::exception&) {
      // Nothing left to roll back.
    }
    return f;
  }
}

Status SqliteStore::run_read(const std::function<void(JobStore&)>& body) {
  if (auto gone = opened_.replaced()) return fail(*gone);
  std::lock_guard lock(read_mu_);
  try {
    rdb_->exec("BEGIN");
    try {
      body(*rstore_);
    } catch (...) {
      rdb_->exec("ROLLBACK");
      throw;
    }
    rdb_->exec("COMMIT");
    return {};
  } catch (const std::exception& e) {
    return fail(database_error(options_.path, "reading", e));
  }
}

}  // namespace ratchet::store
