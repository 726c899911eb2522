// A server restart, as clients see a failover: connections notice it and
// reset() brings them back, prepared statements included. Runs under
// RESOURCE_LOCK postgres_restart, like every test on the shared cluster.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"

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

}  // namespace
}  // namespace ratchet::store::pg
