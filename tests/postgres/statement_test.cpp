// Statements: bound parameters (quotes, NULL), prepared statements, typed
// getters, affected rows and errors that keep their SQLSTATE.
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "pg_options.hpp"
#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"

namespace ratchet::store::pg {
namespace {

using ratchet::testing::pg_options;
class PgStatement : public ratchet::testing::PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    auto opened = connect(pg_options(env_.url));
    ASSERT_TRUE(opened) << opened.error().to_string();
    conn_.emplace(std::move(*opened));
    // A temporary table: private to this session, gone when it ends.
    auto made = conn_->exec("CREATE TEMP TABLE items (id bigint PRIMARY KEY, name text)");
    ASSERT_TRUE(made) << made.error().to_string();
  }

  std::optional<Connection> conn_;
};

TEST_F(PgStatement, BindsQuotesAndNullsAndReadsThemBack) {
  const std::string tricky = "O'Reilly \"quoted\"; DROP TABLE items; -- \\ \xc3\xbc";
  auto rows =
      conn_->exec_params("SELECT $1::text AS a, $2::text IS NULL AS b, $3::bigint + 1 AS c, $2::text AS d",
                         {tricky, std::nullopt, "41"});
  ASSERT_TRUE(rows) << rows.error().to_string();
  ASSERT_EQ(rows->size(), 1);
  ASSERT_EQ(rows->columns(), 4);
  EXPECT_EQ(rows->get_text(0, 0), tricky);
  EXPECT_EQ(rows->get_text(0, 1), "t");
  EXPECT_EQ(rows->get_int64(0, 2).value(), 42);
  EXPECT_TRUE(rows->is_null(0, 3));
  EXPECT_EQ(rows->get_optional_text(0, 3), std::nullopt);
  EXPECT_EQ(rows->column("c"), 2);
  EXPECT_EQ(rows->column("nope"), std::nullopt);
  EXPECT_FALSE(rows->get_int64(0, 3));  // NULL is no integer
  EXPECT_FALSE(rows->get_int64(0, 0));  // nor is text
}

TEST_F(PgStatement, CountsAffectedRows) {
  for (int id = 1; id <= 3; ++id) {
    auto inserted = conn_->exec_params("INSERT INTO items VALUES ($1, $2)", {std::to_string(id), "n"});
    ASSERT_TRUE(inserted) << inserted.error().to_string();
    EXPECT_EQ(inserted->affected(), 1);
  }
  auto updated = conn_->exec_params("UPDATE items SET name = $1 WHERE id >= $2", {std::nullopt, "2"});
  ASSERT_TRUE(updated) << updated.error().to_string();
  EXPECT_EQ(updated->affected(), 2);
  auto made = conn_->exec("CREATE TEMP TABLE other (x int)");
  ASSERT_TRUE(made);
  EXPECT_EQ(made->affected(), 0);
}

TEST_F(PgStatement, PreparedStatementsRunWithParameters) {
  ASSERT_TRUE(conn_->prepare("insert_item", "INSERT INTO items VALUES ($1, $2)", 2));
  ASSERT_TRUE(conn_->prepare("insert_item", "INSERT INTO items VALUES ($1, $2)", 2));  // again: a no-op
  ASSERT_TRUE(conn_->prepare("count_unnamed", "SELECT count(*) FROM items WHERE name IS NULL", 0));
  for (const auto& [id, name] :
       {std::pair<std::string, Param>{"1", "a"}, {"2", std::nullopt}, {"3", std::nullopt}}) {
    auto done = conn_->exec_prepared("insert_item", {id, name});
    ASSERT_TRUE(done) << done.error().to_string();
    EXPECT_EQ(done->affected(), 1);
  }
  auto count = conn_->exec_prepared("count_unnamed", {});
  ASSERT_TRUE(count) << count.error().to_string();
  EXPECT_EQ(count->get_int64(0, 0).value(), 2);
}

TEST_F(PgStatement, PreparedStatementMisuseIsAnInvalidArgument) {
  auto unknown = conn_->exec_prepared("never_prepared", {});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().error().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(conn_->prepare("p", "SELECT 1", 0));
  auto changed = conn_->prepare("p", "SELECT 2", 0);
  ASSERT_FALSE(changed);
  EXPECT_EQ(changed.error().error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(PgStatement, AUniqueViolationKeepsItsSqlstate) {
  ASSERT_TRUE(conn_->exec("INSERT INTO items VALUES (1, 'first')"));
  auto again = conn_->exec_params("INSERT INTO items VALUES ($1, $2)", {"1", "second"});
  ASSERT_FALSE(again);
  const PgError& e = again.error();
  EXPECT_EQ(e.sqlstate(), "23505");
  EXPECT_EQ(e.condition(), Condition::kUniqueViolation);
  EXPECT_EQ(e.error().code(), ErrorCode::kDatabase);
  EXPECT_FALSE(e.needs_reconnect());
  EXPECT_FALSE(e.transaction_retryable());
  const std::string& msg = e.error().message();
  EXPECT_NE(msg.find("SQLSTATE 23505"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ratchet@127.0.0.1:" + env_.port + "/ratchet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("INSERT INTO items"), std::string::npos) << msg;
  EXPECT_NE(msg.find("already exists"), std::string::npos) << msg;  // the server's DETAIL
  // The connection stays usable after a statement error.
  EXPECT_FALSE(conn_->is_broken());
  EXPECT_TRUE(conn_->exec("SELECT 1"));
}

TEST_F(PgStatement, AFailedTransactionIsRolledBackExplicitly) {
  ASSERT_TRUE(conn_->exec("BEGIN"));
  EXPECT_FALSE(conn_->idle_in_no_transaction());
  EXPECT_FALSE(conn_->exec("SELECT 1/0"));
  auto refused = conn_->exec("SELECT 1");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().sqlstate(), "25P02");  // in_failed_sql_transaction
  ASSERT_TRUE(conn_->exec("ROLLBACK"));
  EXPECT_TRUE(conn_->idle_in_no_transaction());
}

TEST_F(PgStatement, QuotesIdentifiers) {
  EXPECT_EQ(conn_->quote_identifier("Jobs \"now\""), "\"Jobs \"\"now\"\"\"");
}

}  // namespace
}  // namespace ratchet::store::pg
