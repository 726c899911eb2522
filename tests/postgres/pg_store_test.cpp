// Opening the job store on a PostgreSQL database, through the same
// open_store() the engine uses: what only a server has (roles, passwords, a
// schema shared with an application's tables). What every backend does on
// opening (the schema version, a database too new or not ratchet's) is in
// the conformance suite (tests/store/schema_test.cpp).
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

TEST_F(PgStoreOpen, AnEmptySchema_NeedsNoSuperuserAndShowsNoPassword) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  auto s = open(url);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ((*s)->location().find(env_.password()), std::string::npos);
  EXPECT_EQ(scalar(url, "SELECT rolsuper::int FROM pg_roles WHERE rolname = current_user"), 0)
      << "the test role is no superuser, and needs none";
}

// Unlike an SQLite file, which is ratchet's alone, a PostgreSQL schema may
// hold an application's tables: ratchet's (ratchet_*) go beside them.
TEST_F(PgStoreOpen, AnApplicationsOwnTables_RatchetLivesBesideThemAndLeavesThemAlone) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  {
    auto c = connect(pg_options(url));
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->exec("CREATE TABLE jobs (id int, what text); INSERT INTO jobs VALUES (1, 'mine')"));
  }
  for (int i = 0; i < 2; ++i) {
    auto s = open(url);
    ASSERT_TRUE(s) << s.error().to_string();
  }
  EXPECT_EQ(scalar(url, "SELECT COUNT(*) FROM jobs WHERE what = 'mine'"), 1);
  EXPECT_EQ(scalar(url, "SELECT COUNT(*) FROM ratchet_jobs"), 0);
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
