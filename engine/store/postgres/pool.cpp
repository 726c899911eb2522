#include "store/postgres/pool.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "store/postgres/url.hpp"

namespace ratchet::store::pg {

using Clock = std::chrono::steady_clock;

Pool::Lease::Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
  other.conn_.reset();
}

Pool::Lease::~Lease() {
  if (conn_) pool_->give_back(std::move(*conn_));
}

Pool::Pool(PoolOptions options) : options_(std::move(options)) {}

std::size_t Pool::open_count() const {
  const std::lock_guard lock(mutex_);
  return open_;
}

std::size_t Pool::idle_count() const {
  const std::lock_guard lock(mutex_);
  return idle_.size();
}

void Pool::drop_one() {
  const std::lock_guard lock(mutex_);
  --open_;
  changed_.notify_one();
}

void Pool::give_back(Connection conn) {
  // Outside the lock: a rollback is a round trip to the server. When it
  // fails the session's state is unknown, so the connection goes.
  bool keep = !conn.is_broken();
  if (keep && !conn.idle_in_no_transaction()) keep = conn.exec("ROLLBACK") && conn.idle_in_no_transaction();
  if (keep) {
    const std::lock_guard lock(mutex_);
    idle_.push_back(std::move(conn));
    changed_.notify_one();
    return;
  }
  drop_one();  // `conn` closes after this, outside the lock
}

PgResult<Pool::Lease> Pool::borrow() {
  const auto deadline = Clock::now() + options_.borrow_timeout;
  std::unique_lock lock(mutex_);
  while (true) {
    if (!idle_.empty()) {
      Connection conn = std::move(idle_.back());
      idle_.pop_back();
      lock.unlock();
      if (!conn.is_broken()) return Lease(this, std::move(conn));
      drop_one();
      lock.lock();
      continue;
    }
    if (open_ < options_.max_size) {
      const auto now = Clock::now();
      if (now < retry_at_) {
        if (retry_at_ > deadline && last_error_) return std::unexpected(*last_error_);
        changed_.wait_until(lock, retry_at_);
        continue;
      }
      ++open_;
      lock.unlock();
      auto conn = connect(options_.connect);
      lock.lock();
      if (conn) {
        backoff_ = std::chrono::milliseconds(0);
        last_error_.reset();
        return Lease(this, std::move(*conn));
      }
      --open_;
      backoff_ = std::clamp(backoff_ * 2, options_.min_backoff, options_.max_backoff);
      retry_at_ = Clock::now() + backoff_;
      last_error_ = conn.error();
      changed_.notify_all();
      return std::unexpected(std::move(conn.error()));
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= options_.max_size) {
      return std::unexpected(
          PgError(Error::timeout("all " + std::to_string(options_.max_size) +
                                 " connections to PostgreSQL at " + mask_url(options_.connect.url) +
                                 " stayed in use for " + std::to_string(options_.borrow_timeout.count()) +
                                 " ms; raise the pool size or shorten the work done while holding one"),
                  ""));
    }
  }
}

}  // namespace ratchet::store::pg
