// Opening the job store on a PostgreSQL database, through the same
// open_store() the engine uses: the schema is created once, a database that
// a newer ratchet wrote or whose ratchet_jobs table ratchet did not make is
// refused before anything is written, and bad settings get errors that say
// what, where and how to fix, without a password.
#include <gtest/gtest.h>

#include <string>

#include "fresh_schema.hpp"
#include "pg_options.hpp"
#include "store/open_store.hpp"
#include "store/postgres/connection.hpp"

namespace ratchet::store::pg {
namespace {

using ratchet::testing::pg_options;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PgStoreOpen : public ratchet::testing::PgTest {
 protected:
  Result<std::unique_ptr<Store>> open(const std::string& url) {
    StoreOptions o;
    o.database = url;
    return open_store(o);
  }
  std::int64_t scalar(const std::string& url, const std::string& sql) {
    auto c = connect(pg_options(url));
    EXPECT_TRUE(c) << c.error().to_string();
    if (!c) return -1;
    auto r = c->exec(sql);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? r->get_int64(0, 0).value_or(-1) : -1;
  }
};

TEST_F(PgStoreOpen, AnEmptySchema_GetsTheTablesOnceAndReopens) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  {
    auto s = open(url);
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ((*s)->location().find(env_.password()), std::string::npos);
  }
  auto again = open(url);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(scalar(url, "SELECT COUNT(*) FROM ratchet_schema"), 1) << "migrated once";
  EXPECT_EQ(scalar(url, "SELECT rolsuper::int FROM pg_roles WHERE rolname = current_user"), 0)
      << "the test role is no superuser, and needs none";
}

TEST_F(PgStoreOpen, WrittenByANewerRatchet_IsRefusedSayingUpgrade) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  ASSERT_TRUE(open(url));
  ASSERT_EQ(
      scalar(url, "WITH v AS (INSERT INTO ratchet_schema VALUES (999) RETURNING version) SELECT 1 FROM v"),
      1);
  auto s = open(url);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  EXPECT_TRUE(contains(s.error().message(), "newer ratchet")) << s.error().message();
}

TEST_F(PgStoreOpen, AJobsTableRatchetDidNotCreate_IsRefusedAndLeftAlone) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  {
    auto c = connect(pg_options(url));
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->exec("CREATE TABLE ratchet_jobs (id int, what text)"));
  }
  auto s = open(url);
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message(), "did not create")) << s.error().message();
  EXPECT_EQ(scalar(url,
                   "SELECT COUNT(*) FROM pg_tables WHERE tablename LIKE 'ratchet%' AND schemaname = "
                   "current_schema()"),
            1)
      << "nothing was written";
}

TEST_F(PgStoreOpen, WrongPassword_ClearErrorWithoutThePassword) {
  const std::string url = env_.url + "?passfile=/nonexistent/pgpass";
  ::setenv("PGPASSWORD", "not-the-password-42", 1);
  auto s = open(url);
  ::unsetenv("PGPASSWORD");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  EXPECT_TRUE(contains(s.error().message(), "127.0.0.1:" + env_.port)) << s.error().message();
  EXPECT_TRUE(contains(s.error().message(), "user \"ratchet\"")) << s.error().message();
  EXPECT_TRUE(contains(s.error().message(), "PGPASSWORD")) << "says how to fix it: " << s.error().message();
  EXPECT_FALSE(contains(s.error().message(), "not-the-password-42")) << s.error().message();
}

TEST_F(PgStoreOpen, UnreachableServer_ClearErrorNamingWhere) {
  auto s = open("postgresql://ratchet@127.0.0.1:1/ratchet?connect_timeout=2");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  EXPECT_TRUE(contains(s.error().message(), "127.0.0.1:1")) << s.error().message();
}

}  // namespace
}  // namespace ratchet::store::pg
