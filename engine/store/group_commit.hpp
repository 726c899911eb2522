// The writer every backend shares: one thread that takes every queued write,
// runs each inside its own savepoint of one transaction, and commits once.
// Many workers checkpointing at once thus share one commit, without any of
// them continuing before its own write is durable. A backend supplies the
// transaction (begin, a savepoint per write, commit) and says of each
// failure whether waiting may cure it (a lock held by another connection, a
// server that is restarting) and whether it is the disk's.
//
// The retry rules of store.hpp live here: a transaction that cannot begin
// for a reason waiting cures is tried again with backoff; a write without a
// lease gives up after about one busy timeout, a write under a lease once
// its lease would expire on the clock. A batch whose connection was lost
// before its COMMIT (a server restarting) is run again as a whole, so a
// write's body may run more than once: bodies only call the JobStore and
// keep what it returns. A connection lost during COMMIT leaves the outcome
// unknown; those writes report the error rather than risk running twice.
//
// Where a savepoint costs a round trip to a server (PostgreSQL), a batch is
// first run without them (run_unguarded): a write that fails there spoils
// the transaction, so the batch is rolled back and run again, each write in
// its own savepoint, and only the failing write reports its error.
//
// Run writes (Store::write_run_async) queued next to each other, of
// distinct jobs, go to JobStore::write_runs together when the backend
// merges_runs(): one call, so a server backend writes them in a few
// statements instead of a few per job. Guarded, each goes alone.
//
// Ownership: a backend's constructor calls start_writer() once its
// connections are open, and its destructor stop_writer() before closing
// them (queued writes are finished first).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "store/store.hpp"

namespace ratchet::store {

class GroupCommitStore : public Store {
 public:
  ~GroupCommitStore() override;

  void write_async(std::function<void(JobStore&)> body, std::function<void(std::optional<Error>)> done,
                   std::optional<TimePoint> lease_until = std::nullopt) override;
  void write_run_async(RunWrite run, std::function<void(Result<LeaseWrite>)> done,
                       TimePoint lease_until) override;
  [[nodiscard]] Result<LeaseWrite> write_run_under_lease(TimePoint lease_until, RunWrite run) override;
  bool stalled() const override;
  void wait_while_stalled(std::stop_token stop, std::chrono::steady_clock::duration at_most) const override;
  std::uint64_t commits() const override;
  std::optional<Error> write_failure(int in_a_row,
                                     std::chrono::steady_clock::duration for_at_least) const override;
  std::vector<Outage> write_outages() const override;

 protected:
  // A backend's failure, as reported to the writes it failed.
  struct Failure {
    Error error;
    bool transient = false;  // waiting may cure it: locked, or the server is unreachable for now
    bool disk =
        false;  // the disk, the file or the schema refuses writes, as waiting does not cure (write_failure)
    // The connection went with the transaction before COMMIT was sent: none
    // of the batch committed, so the whole batch is begun again.
    bool transaction_lost = false;
    // The write ran without a savepoint and the transaction cannot go on
    // (run_unguarded): the batch is rolled back and run again guarded.
    bool spoiled = false;
  };

  // `clock`: the clock leases of writes are read on (null: the system clock);
  // `busy_timeout`: how long a write without a lease waits for the database.
  GroupCommitStore(std::shared_ptr<const Clock> clock, std::chrono::steady_clock::duration busy_timeout);
  void start_writer();
  void stop_writer();

  std::optional<Error> run_write(std::function<void(JobStore&)> body,
                                 std::optional<TimePoint> lease_until) override;

  // On the writer thread, in this order for each batch.
  virtual std::optional<Failure> begin_transaction() = 0;
  // Runs body in a savepoint of the open transaction; on a failure the
  // savepoint is rolled back and the failure returned (the transaction goes on).
  virtual std::optional<Failure> run_in_savepoint(const std::function<void(JobStore&)>& body) = 0;
  // Runs body in the open transaction without a savepoint; a failure marked
  // `spoiled` leaves the transaction to be rolled back. Default: a savepoint
  // anyway, for backends where one is cheap.
  virtual std::optional<Failure> run_unguarded(const std::function<void(JobStore&)>& body) {
    return run_in_savepoint(body);
  }
  // Whether run writes queued together go to JobStore::write_runs in one
  // call (worth it where each statement is a round trip).
  virtual bool merges_runs() const { return false; }
  // Rolls the open transaction back; errors are ignored (a lost connection
  // has no transaction left).
  virtual void rollback_transaction() = 0;
  // Commits; on a failure rolls the transaction back.
  virtual std::optional<Failure> commit_transaction() = 0;

 private:
  // One queued write. The caller sleeps on its own condition variable (a
  // semaphore's spin-and-yield costs more than it saves on a busy machine).
  struct Op {
    std::function<void(JobStore&)> body;
    // Set for a run's write (write_run_async, write_run_under_lease) instead
    // of body; run_written is what it got.
    std::optional<RunWrite> run;
    LeaseWrite run_written;
    std::function<void(Result<LeaseWrite>)> on_run_done;
    std::optional<Error> error;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    // Set for write_async: the writer calls it and deletes the Op.
    std::function<void(std::optional<Error>)> on_done;
    // Set for a write under a lease: retried while locked, until then.
    std::optional<TimePoint> lease_until;
    std::chrono::steady_clock::time_point queued = std::chrono::steady_clock::now();
  };

  void submit(Op& op);
  void enqueue(std::unique_ptr<Op> op);
  // Runs batch[from, to) (one body, or run writes together) in the open
  // transaction, guarded by a savepoint or not.
  std::optional<Failure> run_ops(std::deque<Op*>& batch, std::size_t from, std::size_t to, bool guarded);
  // Where the ops to run with batch[from] end.
  std::size_t group_end(const std::deque<Op*>& batch, std::size_t from, bool guarded) const;
  void run_writer(std::stop_token stop);
  void commit_batch(std::deque<Op*>& batch, std::stop_token stop);
  // Begins the batch's transaction; false when every op of it failed meanwhile.
  bool begin_batch(std::deque<Op*>& batch, std::stop_token stop);
  void set_stalled(bool stalled);
  // After each batch: whether it committed, or the disk error it failed with
  // (its attempt began at `tried`).
  void note_batch(bool committed, const std::optional<Error>& disk_error, TimePoint tried);
  // A write failed for the database's sake in an attempt begun at `tried`.
  void note_outage(TimePoint tried);
  // Tells op's caller it is done (error set or not); op may be gone after.
  static void finish_op(Op* op);

  std::shared_ptr<const Clock> clock_;
  std::chrono::steady_clock::duration busy_timeout_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Op*> queue_;
  std::uint64_t commits_ = 0;
  // The batches failed in a row for a disk reason, since when, and the last error.
  int disk_failures_ = 0;
  std::chrono::steady_clock::time_point disk_failing_since_{};
  std::optional<Error> disk_error_;
  bool stalled_ = false;
  // Store::write_outages; the last one is open until a batch commits.
  std::deque<Outage> outages_;
  bool outage_open_ = false;
  mutable std::condition_variable_any stall_cv_;
  std::jthread thread_;
};

}  // namespace ratchet::store
