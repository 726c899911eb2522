// The connection pool: reuse, a bound on open connections, broken and
// mid-transaction connections given back, threads, and backoff.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pg_test_env.hpp"
#include "store/postgres/pool.hpp"

namespace ratchet::store::pg {
namespace {

using namespace std::chrono_literals;

class PgPool : public ratchet::testing::PgTest {
 protected:
  PoolOptions options(std::size_t max_size) const {
    PoolOptions o;
    o.connect.url = env_.url;
    o.max_size = max_size;
    o.borrow_timeout = 2s;
    return o;
  }
};

std::string backend_pid(Connection& conn) {
  auto rows = conn.exec("SELECT pg_backend_pid()");
  return rows ? std::string(rows->get_text(0, 0)) : std::string("error: " + rows.error().to_string());
}

TEST_F(PgPool, ReusesAGivenBackConnection) {
  Pool pool(options(2));
  std::string first;
  {
    auto lease = pool.borrow();
    ASSERT_TRUE(lease) << lease.error().to_string();
    first = backend_pid(**lease);
  }
  EXPECT_EQ(pool.idle_count(), 1u);
  auto again = pool.borrow();
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(backend_pid(**again), first);
  EXPECT_EQ(pool.open_count(), 1u);
}

TEST_F(PgPool, BorrowTimesOutWhenAllAreLent) {
  PoolOptions o = options(1);
  o.borrow_timeout = 200ms;
  Pool pool(o);
  auto held = pool.borrow();
  ASSERT_TRUE(held) << held.error().to_string();
  const auto start = std::chrono::steady_clock::now();
  auto refused = pool.borrow();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().error().code(), ErrorCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(refused.error().error().message().find(env_.password()), std::string::npos);
}

TEST_F(PgPool, DropsABrokenConnection) {
  Pool pool(options(2));
  std::string first;
  {
    auto lease = pool.borrow();
    ASSERT_TRUE(lease);
    first = backend_pid(**lease);
    EXPECT_FALSE((*lease)->exec("SELECT pg_terminate_backend(pg_backend_pid())"));
  }
  EXPECT_EQ(pool.open_count(), 0u);
  auto fresh = pool.borrow();
  ASSERT_TRUE(fresh) << fresh.error().to_string();
  EXPECT_NE(backend_pid(**fresh), first);
}

TEST_F(PgPool, RollsBackAnOpenTransaction) {
  Pool pool(options(1));
  {
    auto lease = pool.borrow();
    ASSERT_TRUE(lease);
    ASSERT_TRUE((*lease)->exec("BEGIN; CREATE TEMP TABLE scratch (x int)"));
  }
  auto lease = pool.borrow();
  ASSERT_TRUE(lease);
  EXPECT_TRUE((*lease)->idle_in_no_transaction());
  auto gone = (*lease)->exec("SELECT * FROM scratch");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().condition(), Condition::kUndefinedTable);
}

TEST_F(PgPool, ServesThreadsWithinItsBound) {
  Pool pool(options(3));
  std::atomic<int> ok{0};
  std::atomic<std::size_t> most_open{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 15; ++i) {
        auto lease = pool.borrow();
        if (!lease) continue;
        if ((*lease)->exec("SELECT 1")) ++ok;
        std::size_t open = pool.open_count();
        std::size_t seen = most_open.load();
        while (open > seen && !most_open.compare_exchange_weak(seen, open)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6 * 15);
  EXPECT_LE(most_open.load(), 3u);
}

TEST_F(PgPool, BacksOffAfterAFailedConnect) {
  PoolOptions o;
  o.connect.url = "postgresql://ratchet@127.0.0.1:1/ratchet";
  o.min_backoff = 1s;
  o.borrow_timeout = 100ms;
  Pool pool(o);
  auto first = pool.borrow();
  ASSERT_FALSE(first);
  EXPECT_TRUE(first.error().needs_reconnect());
  // Within the backoff the last error comes back at once, without a try.
  const auto start = std::chrono::steady_clock::now();
  auto second = pool.borrow();
  ASSERT_FALSE(second);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_EQ(second.error().error().message(), first.error().error().message());
  EXPECT_EQ(pool.open_count(), 0u);
}

}  // namespace
}  // namespace ratchet::store::pg
