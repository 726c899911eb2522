// The Store on one SQLite file (the embedded default): a writer connection
// whose batches begin with BEGIN IMMEDIATE (waiting up to the busy timeout
// for another connection's write lock; a lock held past it is transient for
// the group-commit writer), and a read connection for queries.
//
// The file is checked to be the one opened before each write batch and each
// read: one removed or replaced under a running process (a backup restored
// by moving it into place) would take its writes in the old file, which no
// other process reads, and they would be lost; such a write fails as the
// disk's failures do (the run stops with the error), and a read fails.
//
// Ownership: owns both connections; destroying it finishes queued writes
// before closing them.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/crash_record.hpp"
#include "store/group_commit.hpp"
#include "store/sqlite/database.hpp"
#include "store/sqlite/opened_file.hpp"

namespace ratchet::store {

class SqliteJobStore;

class SqliteStore final : public GroupCommitStore {
 public:
  // Opens (creating and migrating) the file; kDatabase errors name it and what to do.
  [[nodiscard]] static Result<std::unique_ptr<SqliteStore>> open(const DatabaseOptions& options);
  ~SqliteStore() override;

  std::string location() const override { return options_.path.string(); }
  std::filesystem::path crash_record() const override { return crash_record_path(options_.path); }
  LimiterTablesFactory limiter_tables() const override;
  const std::filesystem::path& path() const { return options_.path; }

 protected:
  std::optional<Failure> begin_transaction() override;
  std::optional<Failure> run_in_savepoint(const std::function<void(JobStore&)>& body) override;
  void rollback_transaction() override;
  std::optional<Failure> commit_transaction() override;
  [[nodiscard]] Status run_read(const std::function<void(JobStore&)>& body) override;

 private:
  SqliteStore(DatabaseOptions options, std::unique_ptr<SQLite::Database> writer,
              std::unique_ptr<SQLite::Database> reader);
  Failure failure(std::string_view doing, const std::exception& e) const;

  DatabaseOptions options_;
  std::unique_ptr<SQLite::Database> wdb_;
  std::unique_ptr<SqliteJobStore> wstore_;
  std::unique_ptr<SQLite::Statement> savepoint_, release_, rollback_to_;
  std::unique_ptr<SQLite::Database> rdb_;
  std::unique_ptr<SqliteJobStore> rstore_;
  std::mutex read_mu_;
  OpenedFile opened_;
};

}  // namespace ratchet::store
