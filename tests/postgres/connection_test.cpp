// Connecting: success, and errors that say what failed, where and how to
// fix it, without ever showing a password.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/listener.hpp"

namespace ratchet::store::pg {
namespace {

using ratchet::testing::pg_options;
using ratchet::testing::PgTest;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PgConnect : public PgTest {};

TEST_F(PgConnect, OpensWithThePasswordFile) {
  auto conn = connect(pg_options(env_.url));
  ASSERT_TRUE(conn) << conn.error().to_string();
  EXPECT_EQ(conn->target(), "ratchet@127.0.0.1:" + env_.port + "/ratchet");
  EXPECT_FALSE(conn->is_broken());
  auto who = conn->exec("SELECT current_user, current_setting('application_name')");
  ASSERT_TRUE(who) << who.error().to_string();
  EXPECT_EQ(who->get_text(0, 0), "ratchet");
  EXPECT_EQ(who->get_text(0, 1), "ratchet");
}

// libpq printed what a server says outside a query ("FATAL: terminating
// connection due to administrator command") straight to stderr, a bare
// line in the middle of `--log-format json`. It goes through the log.
TEST_F(PgConnect, AServerMessageOutsideAQueryIsNotPrintedRaw) {
  auto conn = connect(pg_options(env_.url));
  auto admin = connect(pg_options(env_.url));
  ASSERT_TRUE(conn) << conn.error().to_string();
  ASSERT_TRUE(admin) << admin.error().to_string();
  auto pid = conn->exec("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid);
  ASSERT_TRUE(listen(*conn, "server-message-test"));
  ::testing::internal::CaptureStderr();
  auto killed = admin->exec("SELECT pg_terminate_backend(" + std::string(pid->get_text(0, 0)) + ")");
  // Read while idle, as the store's listener waits for its notifications.
  bool broken = false;
  for (int i = 0; i < 20 && !broken; ++i) {
    broken = !wait_for_notification(*conn, std::chrono::milliseconds(50)).has_value();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(killed) << killed.error().to_string();
  EXPECT_TRUE(broken);
  EXPECT_FALSE(contains(err, "FATAL:")) << err;
  EXPECT_FALSE(contains(err, "terminating connection")) << err;
}

TEST_F(PgConnect, OpensWithAPasswordHandedInSeparately) {
  // passfile=/nonexistent: only the explicit password can log in.
  auto conn = connect(pg_options(env_.url + "?passfile=/nonexistent/pgpass", env_.password()));
  ASSERT_TRUE(conn) << conn.error().to_string();
}

TEST_F(PgConnect, WrongPasswordNamesUserAndServerAndHowToFix) {
  const std::string wrong = "Wrong-Secret-4711";
  auto conn = connect(pg_options(env_.url, wrong));
  ASSERT_FALSE(conn);
  const std::string& msg = conn.error().error().message();
  EXPECT_EQ(conn.error().condition(), Condition::kAuthFailed) << msg;
  EXPECT_EQ(conn.error().error().code(), ErrorCode::kDatabase);
  EXPECT_TRUE(contains(msg, "user \"ratchet\"")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + env_.port)) << msg;
  EXPECT_TRUE(contains(msg, "PGPASSWORD")) << msg;
  EXPECT_TRUE(contains(msg, "~/.pgpass")) << msg;
  EXPECT_FALSE(contains(msg, wrong)) << msg;
  EXPECT_FALSE(contains(msg, env_.password())) << msg;
}

TEST_F(PgConnect, WrongPasswordInTheUrlIsNotShown) {
  const std::string wrong = "Url-Secret-0815";
  auto conn = connect(pg_options("postgresql://ratchet:" + wrong + "@127.0.0.1:" + env_.port + "/ratchet"));
  ASSERT_FALSE(conn);
  const std::string& msg = conn.error().error().message();
  EXPECT_EQ(conn.error().condition(), Condition::kAuthFailed) << msg;
  EXPECT_FALSE(contains(msg, wrong)) << msg;
}

TEST_F(PgConnect, MissingPasswordSaysWhereToPutOne) {
  auto conn = connect(pg_options(env_.url + "?passfile=/nonexistent/pgpass"));
  ASSERT_FALSE(conn);
  const std::string& msg = conn.error().error().message();
  EXPECT_EQ(conn.error().sqlstate(), "28000") << msg;
  EXPECT_TRUE(contains(msg, "none was found")) << msg;
  EXPECT_TRUE(contains(msg, "PGPASSFILE")) << msg;
  EXPECT_TRUE(contains(msg, "${NAME}")) << msg;
}

TEST_F(PgConnect, UnreachableServerIsAClearError) {
  // Port 1 (tcpmux) is privileged and never served here: refused at once.
  auto conn =
      connect(pg_options("postgresql://ratchet@127.0.0.1:1/ratchet", std::nullopt, std::chrono::seconds(3)));
  ASSERT_FALSE(conn);
  const std::string& msg = conn.error().error().message();
  EXPECT_EQ(conn.error().condition(), Condition::kConnectionLost) << msg;
  EXPECT_TRUE(conn.error().needs_reconnect());
  EXPECT_TRUE(contains(msg, "127.0.0.1:1")) << msg;
  EXPECT_TRUE(contains(msg, "cannot be reached")) << msg;
  EXPECT_TRUE(contains(msg, "database URL")) << msg;
}

TEST_F(PgConnect, MissingDatabaseIsAClearError) {
  auto conn = connect(pg_options(env_.url_for("no_such_database")));
  ASSERT_FALSE(conn);
  const std::string& msg = conn.error().error().message();
  EXPECT_EQ(conn.error().condition(), Condition::kNoSuchDatabase) << msg;
  EXPECT_TRUE(contains(msg, "\"no_such_database\"")) << msg;
  EXPECT_TRUE(contains(msg, "createdb")) << msg;
}

TEST_F(PgConnect, AForeignDatabaseIsReachableAndLacksRatchetTables) {
  auto conn = connect(pg_options(env_.url_for("not_ratchet")));
  ASSERT_TRUE(conn) << conn.error().to_string();
  auto invoices = conn->exec("SELECT count(*) FROM invoices");
  ASSERT_TRUE(invoices) << invoices.error().to_string();
  EXPECT_EQ(invoices->get_int64(0, 0).value(), 2);
  auto jobs = conn->exec("SELECT 1 FROM ratchet_jobs");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().condition(), Condition::kUndefinedTable);
  EXPECT_EQ(jobs.error().sqlstate(), "42P01");
  EXPECT_FALSE(jobs.error().needs_reconnect());
}

}  // namespace
}  // namespace ratchet::store::pg
