// Connecting: success, and errors that say what failed, where and how to
// fix it, without ever showing a password.
#include <string>

#include <gtest/gtest.h>

#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"

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
