// The Store on a PostgreSQL database: the group-commit writer
// (store/group_commit.hpp) on one connection, whose batches are one
// transaction with a savepoint per write, and a read connection whose reads
// are REPEATABLE READ snapshots. Durability is the server's
// (synchronous_commit).
//
// A server that is unreachable, restarting or failing over is transient for
// the writer: the connection is reset and the batch begun again with
// backoff, for as long as the lease of each write lasts (store.hpp). A
// connection lost at COMMIT leaves its outcome unknown; the writes of that
// batch report the error, and a run whose checkpoint did commit finds it
// committed when the job is next claimed, so no committed step runs again.
//
// Ownership: owns both connections; destroying it finishes queued writes
// before closing them.
#pragma once

#include <memory>
#include <mutex>

#include "store/group_commit.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/pg_job_store.hpp"
#include "store/postgres/session.hpp"

namespace ratchet::store::pg {

struct PgStoreOptions {
  ConnectOptions connect;
  std::chrono::milliseconds busy_timeout{5000};
  std::shared_ptr<const Clock> clock;
};

class PgStore final : public GroupCommitStore {
 public:
  // Connects and migrates; the error says what failed, where and how to fix it.
  [[nodiscard]] static Result<std::unique_ptr<PgStore>> open(const PgStoreOptions& options);
  ~PgStore() override;

  std::string location() const override;
  LimiterTablesFactory limiter_tables() const override;

 protected:
  std::optional<Failure> begin_transaction() override;
  std::optional<Failure> run_in_savepoint(const std::function<void(JobStore&)>& body) override;
  std::optional<Failure> commit_transaction() override;
  Status run_read(const std::function<void(JobStore&)>& body) override;

 private:
  struct Side {
    explicit Side(Connection c) : connection(std::move(c)), session(connection), jobs(session) {}
    Connection connection;
    Session session;
    PgJobStore jobs;
  };
  PgStore(PgStoreOptions options, std::unique_ptr<Side> writer, std::unique_ptr<Side> reader);
  // A failure of a statement as the group-commit writer sees it.
  static Failure failure_of(const PgError& e);

  PgStoreOptions options_;
  std::unique_ptr<Side> writer_;
  std::unique_ptr<Side> reader_;
  std::mutex read_mu_;
};

}  // namespace ratchet::store::pg
