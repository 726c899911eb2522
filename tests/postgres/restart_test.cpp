// A server restart, as clients see a failover: connections notice it and
// reset() brings them back, prepared statements included. Runs under
// RESOURCE_LOCK postgres_restart, like every test on the shared cluster.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fresh_schema.hpp"
#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/pg_limiter_tables.hpp"

namespace ratchet::store::pg {
namespace {

using ratchet::testing::pg_options;
class PgRestart : public ratchet::testing::PgTest {};

TEST_F(PgRestart, ConnectionsDetectAServerRestartAndReset) {
  auto idle = connect(pg_options(env_.url));
  auto busy = connect(pg_options(env_.url));
  ASSERT_TRUE(idle) << idle.error().to_string();
  ASSERT_TRUE(busy) << busy.error().to_string();
  ASSERT_TRUE(idle->prepare("plus_one", "SELECT $1::bigint + 1", 1));

  const std::string restart = env_.cluster_script() + " restart " + env_.dir;
  ASSERT_EQ(std::system(restart.c_str()), 0) << restart;

  // Seen without running a statement...
  EXPECT_TRUE(idle->is_broken());
  // ...or by the statement that fails on it.
  auto failed = busy->exec("SELECT 1");
  ASSERT_FALSE(failed);
  EXPECT_TRUE(failed.error().needs_reconnect()) << failed.error().to_string();
  EXPECT_TRUE(busy->is_broken());

  auto reset = idle->reset();
  ASSERT_TRUE(reset) << reset.error().to_string();
  EXPECT_FALSE(idle->is_broken());
  auto sum = idle->exec_prepared("plus_one", {"41"});
  ASSERT_TRUE(sum) << sum.error().to_string();
  EXPECT_EQ(sum->get_int64(0, 0).value(), 42);

  ASSERT_TRUE(busy->reset());
  EXPECT_TRUE(busy->exec("SELECT 1"));
}

// A limiter decision reset its connection once and then failed: a restart
// of about a second failed the calls that asked in it, and the jobs they
// belonged to (12 of 80 dead, in a run with a declared limit). Decisions
// are tried again, with backoff, for up to the busy timeout.
TEST_F(PgRestart, LimiterDecisionsDuringARestartWaitForTheServerInsteadOfFailing) {
  // The one table these decisions use, as the store creates it.
  const std::string url = ratchet::testing::fresh_postgres_schema();
  {
    auto c = connect(pg_options(url));
    ASSERT_TRUE(c) << c.error().to_string();
    ASSERT_TRUE(
        c->exec("CREATE TABLE ratchet_limiter_state (key text PRIMARY KEY, updated_us bigint NOT NULL)"));
  }
  auto open = pg_limiter_tables(pg_options(url), std::chrono::seconds(20));
  auto tables = open();
  ASSERT_TRUE(tables) << tables.error().to_string();
  auto decide = [&] {
    return (*tables)->transact("restart/k", "count a call", [&] {
      auto hw = (*tables)->high_water("restart/k");
      if (!hw) {
        (*tables)->create_state("restart/k", 1);
      } else {
        (*tables)->raise_high_water("restart/k", *hw + 1);
      }
    });
  };
  ASSERT_TRUE(decide());
  std::atomic<bool> restarted{false};
  const std::string restart = env_.cluster_script() + " restart " + env_.dir;
  std::thread server([&] {
    EXPECT_EQ(std::system(restart.c_str()), 0) << restart;
    restarted = true;
  });
  int decisions = 1;
  int failed = 0;
  std::string first_failure;
  while (!restarted) {
    auto st = decide();
    ++decisions;
    if (!st && failed++ == 0) first_failure = st.error().to_string();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server.join();
  ASSERT_TRUE(decide());
  ++decisions;
  EXPECT_EQ(failed, 0) << first_failure;
  std::optional<std::int64_t> count;
  ASSERT_TRUE((*tables)->transact("restart/k", "read", [&] { count = (*tables)->high_water("restart/k"); }));
  ASSERT_TRUE(count);
  // A commit whose answer the restart cut off is run again: at most one.
  EXPECT_GE(*count, decisions);
  EXPECT_LE(*count, decisions + 1);
}

}  // namespace
}  // namespace ratchet::store::pg
