// A small pool of connections to one database, shared by threads: borrow()
// lends a connection (opening one when fewer than max_size are open) and
// the Lease gives it back when it goes out of scope.
//
// A connection found broken is dropped, not lent; a failed connect makes
// the pool wait (doubling from min_backoff to max_backoff) before it tries
// again, so a server that is down is not hammered by every borrower. A
// connection given back inside a transaction is rolled back first.
//
// Thread-safety: borrow() may be called from any thread; a Lease is used
// by one thread. A Pool must outlive its leases.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "store/postgres/connection.hpp"
#include "store/postgres/error.hpp"

namespace ratchet::store::pg {

struct PoolOptions {
  ConnectOptions connect;
  std::size_t max_size = 8;
  // How long borrow() waits for a connection to be given back.
  std::chrono::milliseconds borrow_timeout{5000};
  std::chrono::milliseconds min_backoff{50};
  std::chrono::milliseconds max_backoff{5000};
};

class Pool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    Connection& operator*() noexcept { return *conn_; }
    Connection* operator->() noexcept { return &*conn_; }

   private:
    friend class Pool;
    Lease(Pool* pool, Connection conn) : pool_(pool), conn_(std::move(conn)) {}
    Pool* pool_;
    std::optional<Connection> conn_;
  };

  explicit Pool(PoolOptions options);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A connection, or the error of the last attempt to open one (at once
  // while the pool backs off and waiting would pass borrow_timeout), or a
  // kTimeout error when all max_size connections stay lent.
  PgResult<Lease> borrow();

  // Connections open now (idle and lent).
  std::size_t open_count() const;
  std::size_t idle_count() const;

 private:
  void give_back(Connection conn);
  void drop_one();

  const PoolOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Connection> idle_;
  std::size_t open_ = 0;  // idle + lent + being opened
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point retry_at_{};
  std::optional<PgError> last_error_;
};

}  // namespace ratchet::store::pg
