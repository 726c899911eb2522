// The database behind one Engine, whatever backend holds it: writes that
// commit together (group commit) and reads in one snapshot, each handed the
// backend's JobStore. The backend is chosen by store/open_store.hpp from the
// database setting; the runtime sees only this interface.
//
// write(fn) blocks until the transaction that ran fn has committed, so a
// caller that returns from it knows its change is durable (to the level the
// backend is configured for). One fn's failure rolls back that fn only.
//
// A write made under a lease (write_under_lease, or write_async with
// lease_until: checkpoints, renewals, the end of a run) protects work done
// already, so while the database is locked by another connection (SQLite) or
// unreachable (a server restarting) it is retried, with backoff, for as long
// as the lease lasts on the options' clock; once the lease would expire it is
// given up (an Error saying so, nothing of it written) and the run's steps
// not yet committed will run again. A write without a lease fails after one
// busy timeout. While lease writes wait like this the store is stalled(): the
// scheduler claims no new jobs, whose leases would only run out in the queue.
//
// write_async(fn, done) queues fn without waiting: done(error) runs on the
// writer thread once the transaction has committed (or failed), so it must
// be quick and must not call back into the Store.
//
// A database that refuses writes for a reason waiting does not cure (a full
// disk, an I/O error, a read-only file) fails each batch at once;
// write_failure() says when every commit has failed so for a while, so that
// a host can stop and say why instead of trying for ever.
//
// write_run_async and write_run_under_lease are the same for a run's steps
// and completion (JobStore::write_runs): the writer may merge the run
// writes queued beside each other into a few statements.
//
// Thread-safety: every member may be called from any thread; fn runs on the
// writer thread (write) or under the read lock (read) and must not call back
// into the Store.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"
#include "store/job_store.hpp"
#include "store/limiter_tables.hpp"

namespace ratchet::store {

// A span in which this process's writes could not reach the database (on
// the store's clock): from the start of the first attempt that failed for
// the database's sake (locked past the busy timeout, a server unreachable or
// dropping the connection, a disk refusing writes) to the last that failed.
struct Outage {
  TimePoint from{};
  TimePoint to{};
};

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs fn(JobStore&) in the next group transaction; returns its value once
  // committed, or the Error that prevented the commit.
  template <typename F>
  [[nodiscard]] auto write(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;

  // Like write(fn) for a write that protects work done under a lease lasting
  // until lease_until: retried while the database is locked, until then.
  template <typename F>
  [[nodiscard]] auto write_under_lease(TimePoint lease_until, F&& fn)
      -> Result<std::invoke_result_t<F&, JobStore&>>;

  // Runs fn(JobStore&) inside one read transaction.
  template <typename F>
  [[nodiscard]] auto read(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>>;

  // Queues body(JobStore&) for the next group transaction; done receives
  // nullopt once it committed, or the Error that prevented the commit.
  virtual void write_async(std::function<void(JobStore&)> body,
                           std::function<void(std::optional<Error>)> done,
                           std::optional<TimePoint> lease_until = std::nullopt) = 0;

  // Queues a run's write (JobStore::write_runs), made under the lease
  // lasting until lease_until; done receives what it got once committed, or
  // the Error that prevented the commit. done runs as write_async's does.
  virtual void write_run_async(RunWrite run, std::function<void(Result<LeaseWrite>)> done,
                               TimePoint lease_until) = 0;
  // The same, waiting for the commit.
  [[nodiscard]] virtual Result<LeaseWrite> write_run_under_lease(TimePoint lease_until, RunWrite run) = 0;

  // Whether writes made under a lease are waiting for the database (see above).
  virtual bool stalled() const = 0;
  // Blocks while stalled(), at most `at_most` (real time), or until `stop`.
  virtual void wait_while_stalled(std::stop_token stop,
                                  std::chrono::steady_clock::duration at_most) const = 0;

  // The latest outages (at most kOutagesKept, oldest first), the last one
  // perhaps still going on. A lease of this process's that ran out in one
  // could not be renewed, whatever its job did; a claim passes them on
  // (ClaimRequest::outages) so that such an expiry is not judged a crash.
  static constexpr std::size_t kOutagesKept = 8;
  virtual std::vector<Outage> write_outages() const { return {}; }

  // Commits made by the writer so far (for benchmarks and tests).
  virtual std::uint64_t commits() const = 0;

  // The last error, when at least `in_a_row` batches in a row, over at least
  // `for_at_least`, failed for a reason waiting does not cure and none
  // committed since; nullopt otherwise.
  virtual std::optional<Error> write_failure(int in_a_row,
                                             std::chrono::steady_clock::duration for_at_least) const = 0;

  // Where the data lives, for messages: a file path, or a URL without its password.
  virtual std::string location() const = 0;

  // The file this host's engines on this database append a line to when a
  // crash signal kills them (store/crash_record.hpp), read when the leases
  // they held are judged; empty: crashes are not recorded.
  virtual std::filesystem::path crash_record() const = 0;

  // Opens connections for database-scope limiter state in this database.
  virtual LimiterTablesFactory limiter_tables() const = 0;

  // Calls `wake` (on a thread of the store's, quickly) whenever a process or
  // host sharing this database committed jobs that may be claimed: new ones,
  // ones retried by hand or released. An empty function stops the calls;
  // once this returns, no call of an earlier function is running. A backend
  // that cannot hear other processes (SQLite) never calls it: the scheduler
  // finds their work by polling, as it does anyway at its poll interval.
  virtual void on_new_work(std::function<void()> wake) { (void)wake; }

 protected:
  Store() = default;
  // Runs body in the next group transaction; the error that kept it from
  // committing, or nullopt once it committed.
  [[nodiscard]] virtual std::optional<Error> run_write(std::function<void(JobStore&)> body,
                                                       std::optional<TimePoint> lease_until) = 0;
  [[nodiscard]] virtual Status run_read(const std::function<void(JobStore&)>& body) = 0;

 private:
  template <typename F>
  [[nodiscard]] auto write_with(std::optional<TimePoint> lease_until, F& fn)
      -> Result<std::invoke_result_t<F&, JobStore&>>;
};

template <typename F>
auto Store::write(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  return write_with(std::nullopt, fn);
}

template <typename F>
auto Store::write_under_lease(TimePoint lease_until, F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  return write_with(lease_until, fn);
}

template <typename F>
auto Store::write_with(std::optional<TimePoint> lease_until, F& fn)
    -> Result<std::invoke_result_t<F&, JobStore&>> {
  using T = std::invoke_result_t<F&, JobStore&>;
  if constexpr (std::is_void_v<T>) {
    if (auto error = run_write([&](JobStore& s) { fn(s); }, lease_until)) return fail(std::move(*error));
    return {};
  } else {
    std::optional<T> value;
    if (auto error = run_write([&](JobStore& s) { value.emplace(fn(s)); }, lease_until))
      return fail(std::move(*error));
    return std::move(*value);
  }
}

template <typename F>
auto Store::read(F&& fn) -> Result<std::invoke_result_t<F&, JobStore&>> {
  using T = std::invoke_result_t<F&, JobStore&>;
  if constexpr (std::is_void_v<T>) {
    return run_read([&](JobStore& s) { fn(s); });
  } else {
    std::optional<T> value;
    if (auto st = run_read([&](JobStore& s) { value.emplace(fn(s)); }); !st) return fail(st.error());
    return std::move(*value);
  }
}

}  // namespace ratchet::store
