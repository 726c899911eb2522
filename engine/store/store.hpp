// The database behind one Engine: a writer thread that commits the writes of
// many callers together (group commit), and a read connection for queries.
//
// Group commit: write(fn) queues fn and blocks until the transaction that ran
// it has committed, so a caller that returns from write() knows its change
// is durable (to the synchronous level configured). The writer thread takes
// every queued fn, runs each inside its own SAVEPOINT of one BEGIN IMMEDIATE
// transaction, and commits once. One fn's SQL error rolls back that fn only.
// Many workers checkpointing at once thus share one commit, without any of
// them continuing before its own write is durable.
//
// A database locked by another connection. BEGIN IMMEDIATE waits up to the
// busy timeout for the write lock. A write made without a lease then fails
// with a kDatabase error saying the database is locked (an enqueue or a
// claim is simply refused). A write made under a lease (write_under_lease,
// or write_async with lease_until: checkpoints, renewals, the end of a run)
// protects work already done, so the writer keeps retrying its batch, with
// backoff, for as long as that lease lasts on the options' clock; once the
// lease would expire the write is given up (an Error saying so, nothing of
// it written) and its run's steps not yet committed will run again. While
// the writer waits like this the store is stalled(): the scheduler claims no
// new jobs, whose leases would only run out in the queue.
//
// write_async(fn, done) queues fn the same way without waiting: done(error)
// runs on the writer thread once the transaction has committed (or failed),
// so it must be quick and must not call back into the Store. A worker uses it
// for the last write of a job, so that it takes its next job while the commit
// is on its way.
//
// A database that refuses writes for a reason waiting does not cure (the
// disk or the file size limit is full, an I/O error, the file was made
// read-only) fails each batch at once; the writer goes on with the next one,
// since space may come back. write_failure() says when every commit has
// failed so for a while, so that a host can stop and say why instead of
// trying for ever.
//
// Ownership: Store owns both connections and the writer thread; destroying it
// finishes queued writes and joins the thread. Thread-safety: write() and
// read() may be called from any thread; fn runs on the writer thread (write)
// or under the read lock (read) and must not call back into the Store.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "ratchet/status.hpp"
#include "store/database.hpp"
#include "store/job_store.hpp"

namespace ratchet::store {

class Store {
 public:
  static Result<std::unique_ptr<Store>> open(const DatabaseOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs fn(JobStore&) in the next group transaction; returns its value once
  // committed, or the Error that prevented the commit.
  template <typename F>
  auto write(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;

  // Queues body(JobStore&) for the next group transaction; done receives
  // nullopt once it committed, or the Error that prevented the commit.
  void write_async(std::function<void(JobStore&)> body, std::function<void(std::optional<Error>)> done,
                   std::optional<TimePoint> lease_until = std::nullopt);

  // Like write(fn) for a write that protects work done under a lease lasting
  // until lease_until: retried while the database is locked, until then.
  template <typename F>
  auto write_under_lease(TimePoint lease_until, F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;

  // Whether writes made under a lease are waiting for a write lock that
  // another connection has held past the busy timeout: from the first
  // refused BEGIN until one succeeds or no such write is left.
  bool stalled() const;
  // Blocks while stalled(), at most `at_most` (real time: the lock is another
  // process's), or until `stop`.
  void wait_while_stalled(std::stop_token stop, std::chrono::steady_clock::duration at_most) const;

  // Runs fn(JobStore&) on the read connection inside one read transaction.
  template <typename F>
  auto read(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;

  const std::filesystem::path& path() const { return options_.path; }
  // Commits made by the writer thread so far (for benchmarks and tests).
  std::uint64_t commits() const;

  // The last error, when at least `in_a_row` batches in a row, over at least
  // `for_at_least`, failed for a reason of the disk or the file (see above)
  // and none committed since; nullopt otherwise.
  std::optional<Error> write_failure(int in_a_row, std::chrono::steady_clock::duration for_at_least) const;

 private:
  // One queued write. The caller sleeps on its own condition variable (a
  // semaphore's spin-and-yield costs more than it saves on a busy machine).
  struct Op {
    std::function<void(JobStore&)> body;
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

  Store(DatabaseOptions options, std::unique_ptr<SQLite::Database> writer,
        std::unique_ptr<SQLite::Database> reader);
  void submit(Op& op);
  template <typename F>
  auto write_op(Op& op, F& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;
  void run_writer(std::stop_token stop);
  void commit_batch(std::deque<Op*>& batch, std::stop_token stop);
  // Takes a lock for the batch; false when every op of it failed meanwhile.
  bool begin_batch(std::deque<Op*>& batch, std::stop_token stop);
  void set_stalled(bool stalled);
  // After each batch: whether it committed, or the disk error it failed with.
  void note_batch(bool committed, const std::optional<Error>& disk_error);
  // Tells op's caller it is done (error set or not); op may be gone after.
  static void finish_op(Op* op);
  Status read_impl(const std::function<void(JobStore&)>& body);

  DatabaseOptions options_;
  std::shared_ptr<const Clock> clock_;
  std::unique_ptr<SQLite::Database> wdb_;
  std::unique_ptr<JobStore> wstore_;
  std::unique_ptr<SQLite::Statement> savepoint_, release_, rollback_to_;
  std::unique_ptr<SQLite::Database> rdb_;
  std::unique_ptr<JobStore> rstore_;
  std::mutex read_mu_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Op*> queue_;
  std::uint64_t commits_ = 0;
  // The batches failed in a row for a disk reason, since when, and the last error.
  int disk_failures_ = 0;
  std::chrono::steady_clock::time_point disk_failing_since_{};
  std::optional<Error> disk_error_;
  bool stalled_ = false;
  mutable std::condition_variable_any stall_cv_;
  std::jthread thread_;  // last: joins before the members above go away
};

template <typename F>
auto Store::write(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  Op op;
  return write_op(op, fn);
}

template <typename F>
auto Store::write_under_lease(TimePoint lease_until, F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  Op op;
  op.lease_until = lease_until;
  return write_op(op, fn);
}

template <typename F>
auto Store::write_op(Op& op, F& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  using T = std::invoke_result_t<F&, JobStore&>;
  if constexpr (std::is_void_v<T>) {
    op.body = [&](JobStore& s) { fn(s); };
    submit(op);
    if (op.error) return fail(*op.error);
    return {};
  } else {
    std::optional<T> value;
    op.body = [&](JobStore& s) { value.emplace(fn(s)); };
    submit(op);
    if (op.error) return fail(*op.error);
    return std::move(*value);
  }
}

template <typename F>
auto Store::read(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  using T = std::invoke_result_t<F&, JobStore&>;
  if constexpr (std::is_void_v<T>) {
    return read_impl([&](JobStore& s) { fn(s); });
  } else {
    std::optional<T> value;
    if (auto st = read_impl([&](JobStore& s) { value.emplace(fn(s)); }); !st) return fail(st.error());
    return std::move(*value);
  }
}

}  // namespace ratchet::store
