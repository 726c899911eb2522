// LISTEN/NOTIFY between two sessions: delivery, timeouts, transactions and
// a listener whose connection is cut.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/listener.hpp"

namespace ratchet::store::pg {
namespace {

using ratchet::testing::pg_options;
using namespace std::chrono_literals;

class PgListen : public ratchet::testing::PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    auto l = connect(pg_options(env_.url));
    auto s = connect(pg_options(env_.url));
    ASSERT_TRUE(l) << l.error().to_string();
    ASSERT_TRUE(s) << s.error().to_string();
    listener_.emplace(std::move(*l));
    sender_.emplace(std::move(*s));
  }

  std::optional<Connection> listener_;
  std::optional<Connection> sender_;
};

TEST_F(PgListen, DeliversANotification) {
  const std::string channel = "Ratchet Jobs";  // exact, case and space included
  ASSERT_TRUE(listen(*listener_, channel));
  auto nothing = wait_for_notification(*listener_, 50ms);
  ASSERT_TRUE(nothing) << nothing.error().to_string();
  EXPECT_FALSE(nothing->has_value());

  ASSERT_TRUE(notify(*sender_, channel, "job 'x' is ready"));
  auto got = wait_for_notification(*listener_, 5s);
  ASSERT_TRUE(got) << got.error().to_string();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->channel, channel);
  EXPECT_EQ((*got)->payload, "job 'x' is ready");
  EXPECT_NE((*got)->sender_pid, 0);
}

TEST_F(PgListen, DeliversOnCommitAndStopsAfterUnlisten) {
  ASSERT_TRUE(listen(*listener_, "jobs"));
  ASSERT_TRUE(sender_->exec("BEGIN"));
  ASSERT_TRUE(notify(*sender_, "jobs", "1"));
  auto early = wait_for_notification(*listener_, 100ms);
  ASSERT_TRUE(early);
  EXPECT_FALSE(early->has_value());
  ASSERT_TRUE(sender_->exec("COMMIT"));
  auto got = wait_for_notification(*listener_, 5s);
  ASSERT_TRUE(got);
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->payload, "1");

  ASSERT_TRUE(unlisten(*listener_, "jobs"));
  ASSERT_TRUE(notify(*sender_, "jobs", "2"));
  auto after = wait_for_notification(*listener_, 100ms);
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->has_value());
}

TEST_F(PgListen, ALostConnectionEndsTheWait) {
  ASSERT_TRUE(listen(*listener_, "jobs"));
  auto pid = listener_->exec("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid);
  auto killed =
      sender_->exec_params("SELECT pg_terminate_backend($1::int)", {std::string(pid->get_text(0, 0))});
  ASSERT_TRUE(killed) << killed.error().to_string();
  auto waited = wait_for_notification(*listener_, 5s);
  ASSERT_FALSE(waited);
  EXPECT_TRUE(waited.error().needs_reconnect()) << waited.error().to_string();
}

}  // namespace
}  // namespace ratchet::store::pg
