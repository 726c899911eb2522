#include "store/store.hpp"

#include <SQLiteCpp/Exception.h>

namespace ratchet::store {
namespace {

// Enough to amortise a commit over every worker, small enough that one
// transaction never holds the write lock for long.
constexpr std::size_t kMaxBatch = 512;

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

void Store::submit(Op& op) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(&op);
  }
  cv_.notify_one();
  std::unique_lock lock(op.mu);
  op.cv.wait(lock, [&] { return op.done; });
}

void Store::write_async(std::function<void(JobStore&)> body, std::function<void(std::optional<Error>)> done) {
  auto op = std::make_unique<Op>();
  op->body = std::move(body);
  op->on_done = std::move(done);
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
    commit_batch(batch);
    {
      std::lock_guard lock(mu_);
      ++commits_;
    }
    for (Op* op : batch) {
      if (op->on_done) {
        std::unique_ptr<Op> owned(op);
        owned->on_done(std::move(owned->error));
        continue;
      }
      std::lock_guard lock(op->mu);
      op->done = true;
      // Notified under the lock: the waiter may destroy op as soon as it sees done.
      op->cv.notify_one();
    }
    batch.clear();
  }
}

void Store::commit_batch(std::deque<Op*>& batch) {
  auto fail_all = [&](const Error& e) {
    for (Op* op : batch) {
      if (!op->error) op->error = e;
    }
  };
  try {
    wdb_->exec("BEGIN IMMEDIATE");
  } catch (const std::exception& e) {
    fail_all(database_error(options_.path, "starting a write", e));
    return;
  }
  for (Op* op : batch) {
    try {
      run_prepared(*savepoint_);
      op->body(*wstore_);
      run_prepared(*release_);
    } catch (const std::exception& e) {
      op->error = dynamic_cast<const SQLite::Exception*>(&e) != nullptr
                      ? database_error(options_.path, "writing", e)
                      : Error::internal(std::string("a database write failed: ") + e.what());
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
    fail_all(database_error(options_.path, "committing", e));
    try {
      wdb_->exec("ROLLBACK");
    } catch (const std::exception&) {
      // Nothing left to roll back.
    }
  }
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
