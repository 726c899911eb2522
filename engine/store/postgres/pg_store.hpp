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
// Wake-ups: a batch that made jobs claimable (PgJobStore::take_new_work)
// sends NOTIFY on a channel named after the store's schema, delivered by
// the server when the batch commits; once on_new_work() is given a
// function, a third connection LISTENs on that channel and calls it for
// each notification, and once after every reconnect (notifications sent
// while it was away are lost). Polling stays the fallback.
//
// Ownership: owns its connections and the listening thread; destroying it
// stops the listener, then finishes queued writes before closing the rest.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

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
  // Under $XDG_STATE_HOME/ratchet (or ~/.local/state/ratchet), one file per
  // database and schema as this host's URL names them.
  std::filesystem::path crash_record() const override { return crash_record_; }
  LimiterTablesFactory limiter_tables() const override;
  void on_new_work(std::function<void()> wake) override;

 protected:
  std::optional<Failure> begin_transaction() override;
  std::optional<Failure> run_in_savepoint(const std::function<void(JobStore&)>& body) override;
  std::optional<Failure> run_unguarded(const std::function<void(JobStore&)>& body) override;
  // Every statement is a round trip: a batch's run writes go in one.
  bool merges_runs() const override { return true; }
  void rollback_transaction() override;
  std::optional<Failure> commit_transaction() override;
  [[nodiscard]] Status run_read(const std::function<void(JobStore&)>& body) override;

 private:
  struct Side {
    explicit Side(Connection c) : connection(std::move(c)), session(connection), jobs(session) {}
    Connection connection;
    Session session;
    PgJobStore jobs;
  };
  PgStore(PgStoreOptions options, std::unique_ptr<Side> writer, std::unique_ptr<Side> reader,
          std::string channel);
  // A failure of a statement as the group-commit writer sees it.
  static Failure failure_of(const PgError& e);
  void listen_loop(std::stop_token stop);
  void announce_new_work();

  PgStoreOptions options_;
  std::unique_ptr<Side> writer_;
  std::unique_ptr<Side> reader_;
  std::mutex read_mu_;
  const std::string channel_;  // NOTIFY/LISTEN channel of this schema's jobs
  std::filesystem::path crash_record_;

  std::mutex wake_mu_;  // held while wake_ runs, so clearing it waits for a running call
  std::function<void()> wake_;
  std::jthread listener_;
};

}  // namespace ratchet::store::pg
