#include "store/store.hpp"

#include <sqlite3.h>

#include <SQLiteCpp/Exception.h>
#include <algorithm>

namespace ratchet::store {
namespace {

// Enough to amortise a commit over every worker, small enough that one
// transaction never holds the write lock for long.
constexpr std::size_t kMaxBatch = 512;

// Pauses between attempts to take a write lock that another connection
// holds (each attempt itself waits up to the busy timeout).
constexpr std::chrono::milliseconds kFirstRetry{10};
constexpr std::chrono::milliseconds kMaxRetry{250};

bool is_busy(const std::exception& e) {
  const auto* se = dynamic_cast<const SQLite::Exception*>(&e);
  if (se == nullptr) return false;
  const int code = se->getErrorCode() & 0xff;
  return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

// Failures that waiting for a lock does not cure.
bool is_disk_failure(const std::exception& e) {
  const auto* se = dynamic_cast<const SQLite::Exception*>(&e);
  if (se == nullptr) return false;
  const int code = se->getErrorCode() & 0xff;
  return code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_READONLY || code == SQLITE_CANTOPEN;
}

void run_prepared(SQLite::Statement& s) {
  s.reset();
  s.exec();
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const DatabaseOptions& options) {
  auto writer = open_database(options);
  if (!writer) return fail(writer.error());
  DatabaseOptions read_options = options;
  read_options.migrate = false;
  auto reader = open_database(read_options);
  if (!reader) return fail(reader.error());
  return std::unique_ptr<Store>(new Store(options, std::move(*writer), std::move(*reader)));
}

Store::Store(DatabaseOptions options, std::unique_ptr<SQLite::Database> writer,
             std::unique_ptr<SQLite::Database> reader)
    : options_(std::move(options)),
      clock_(options_.clock ? options_.clock : SystemClock::instance()),
      wdb_(std::move(writer)),
      wstore_(std::make_unique<JobStore>(*wdb_)),
      rdb_(std::move(reader)),
      rstore_(std::make_unique<JobStore>(*rdb_)) {
  savepoint_ = std::make_unique<SQLite::Statement>(*wdb_, "SAVEPOINT op");
  release_ = std::make_unique<SQLite::Statement>(*wdb_, "RELEASE op");
  rollback_to_ = std::make_unique<SQLite::Statement>(*wdb_, "ROLLBACK TO op");
  thread_ = std::jthread([this](std::stop_token stop) { run_writer(stop); });
}

Store::~Store() {
  thread_.request_stop();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Statements before their connections.
  wstore_.reset();
  rstore_.reset();
  savepoint_.reset();
  release_.reset();
  rollback_to_.reset();
}

std::uint64_t Store::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

bool Store::stalled() const {
  std::lock_guard lock(mu_);
  return stalled_;
}

void Store::wait_while_stalled(std::stop_token stop, std::chrono::steady_clock::duration at_most) const {
  std::unique_lock lock(mu_);
  stall_cv_.wait_for(lock, stop, at_most, [&] { return !stalled_; });
}

void Store::set_stalled(bool stalled) {
  {
    std::lock_guard lock(mu_);
    if (stalled_ == stalled) return;
    stalled_ = stalled;
  }
  stall_cv_.notify_all();
}

void Store::finish_op(Op* op) {
  if (op->on_done) {
    std::unique_ptr<Op> owned(op);
    owned->on_done(std::move(owned->error));
    return;
  }
  std::lock_guard lock(op->mu);
  op->done = true;
  // Notified under the lock: the waiter may destroy op as soon as it sees done.
  op->cv.notify_one();
}

void Store::submit(Op& op) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(&op);
  }
  cv_.notify_one();
  std::unique_lock lock(op.mu);
  op.cv.wait(lock, [&] { return op.done; });
}

void Store::write_async(std::function<void(JobStore&)> body, std::function<void(std::optional<Error>)> done,
                        std::optional<TimePoint> lease_until) {
  auto op = std::make_unique<Op>();
  op->body = std::move(body);
  op->on_done = std::move(done);
  op->lease_until = lease_until;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(op.release());
  }
  cv_.notify_one();
}

void Store::run_writer(std::stop_token stop) {
  std::deque<Op*> batch;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return !queue_.empty(); });
      // Stop only once every queued write has run: callers are waiting.
      if (queue_.empty()) return;
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    commit_batch(batch, stop);
    {
      std::lock_guard lock(mu_);
      ++commits_;
    }
    for (Op* op : batch) finish_op(op);
    batch.clear();
  }
}

bool Store::begin_batch(std::deque<Op*>& batch, std::stop_token stop) {
  auto backoff = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kFirstRetry);
  while (true) {
    try {
      wdb_->exec("BEGIN IMMEDIATE");
      set_stalled(false);
      return true;
    } catch (const std::exception& e) {
      const Error error = database_error(options_.path, "starting a write", e);
      if (!is_busy(e) || stop.stop_requested()) {
        for (Op* op : batch) op->error = error;
        note_batch(false, is_disk_failure(e) ? std::optional<Error>(error) : std::nullopt);
        return false;
      }
      // Another connection holds the write lock past the busy timeout. A
      // write without a lease has waited its timeout and fails; one under a
      // lease waits on while the lease lasts: it keeps committed work from
      // being done again.
      set_stalled(true);
      const TimePoint now = clock_->now();
      // (Half the timeout: a write that joined the batch during the stall
      // has waited at least one whole attempt, so at least that.)
      const auto waited_since = std::chrono::steady_clock::now() - options_.busy_timeout / 2;
      std::erase_if(batch, [&](Op* op) {
        const bool give_up = op->lease_until ? *op->lease_until <= now : op->queued <= waited_since;
        if (!give_up) return false;
        op->error = op->lease_until
                        ? Error::database(error.message() +
                                          "; the lease this write was made under expired before the lock "
                                          "was released, so it was given up")
                        : error;
        finish_op(op);
        return true;
      });
      std::unique_lock lock(mu_);
      // Writes queued meanwhile join the batch, so each caller waits for
      // one commit, not for its turn after this one.
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      if (batch.empty()) {
        // No lease write waits for the lock any more: not stalled, so the
        // dispatcher's next claim finds out whether the lock is still held.
        stalled_ = false;
        lock.unlock();
        stall_cv_.notify_all();
        return false;
      }
      cv_.wait_for(lock, stop, backoff, [] { return false; });
      backoff =
          std::min(backoff * 2, std::chrono::duration_cast<std::chrono::steady_clock::duration>(kMaxRetry));
    }
  }
}

void Store::commit_batch(std::deque<Op*>& batch, std::stop_token stop) {
  auto fail_all = [&](const Error& e) {
    for (Op* op : batch) {
      if (!op->error) op->error = e;
    }
  };
  if (!begin_batch(batch, stop)) return;
  std::optional<Error> disk_error;
  for (Op* op : batch) {
    try {
      run_prepared(*savepoint_);
      op->body(*wstore_);
      run_prepared(*release_);
    } catch (const std::exception& e) {
      op->error = dynamic_cast<const SQLite::Exception*>(&e) != nullptr
                      ? database_error(options_.path, "writing", e)
                      : Error::internal(std::string("a database write failed: ") + e.what());
      if (is_disk_failure(e)) disk_error = op->error;
      try {
        run_prepared(*rollback_to_);
        run_prepared(*release_);
      } catch (const std::exception&) {
        // The transaction itself is gone; COMMIT below reports it.
      }
    }
  }
  try {
    wdb_->exec("COMMIT");
  } catch (const std::exception& e) {
    const Error error = database_error(options_.path, "committing", e);
    fail_all(error);
    if (is_disk_failure(e)) disk_error = error;
    try {
      wdb_->exec("ROLLBACK");
    } catch (const std::exception&) {
      // Nothing left to roll back.
    }
    note_batch(false, disk_error);
    return;
  }
  note_batch(!disk_error, disk_error);
}

void Store::note_batch(bool committed, const std::optional<Error>& disk_error) {
  std::lock_guard lock(mu_);
  if (disk_error) {
    if (disk_failures_++ == 0) disk_failing_since_ = std::chrono::steady_clock::now();
    disk_error_ = disk_error;
  } else if (committed) {
    disk_failures_ = 0;
    disk_error_.reset();
  }
}

std::optional<Error> Store::write_failure(int in_a_row,
                                          std::chrono::steady_clock::duration for_at_least) const {
  std::lock_guard lock(mu_);
  if (!disk_error_ || disk_failures_ < in_a_row) return std::nullopt;
  if (std::chrono::steady_clock::now() - disk_failing_since_ < for_at_least) return std::nullopt;
  return disk_error_;
}

Status Store::read_impl(const std::function<void(JobStore&)>& body) {
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
