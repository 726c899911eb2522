// Opening the job store on a PostgreSQL database, through the same
// open_store() the engine uses: what only a server has (roles, passwords, a
// schema shared with an application's tables). What every backend does on
// opening (the schema version, a database too new or not ratchet's) is in
// the conformance suite (tests/store/schema_test.cpp).
#include <gtest/gtest.h>

#include <chrono>
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

// One job written, its id or why not.
Result<JobId> insert_a_job(Store& store) {
  return store.write([](JobStore& js) {
    NewJob j;
    j.type = "t";
    j.args_json = "{}";
    return js.insert(j, 1).id;
  });
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

// A table another session held locked hung every statement on it (claims,
// checkpoints, enqueue) until that session let go, and SIGTERM with them:
// a lock is waited for no longer than busy_timeout, then the write fails
// saying so, and the next one after the lock is gone commits.
TEST_F(PgStoreOpen, ATableHeldLocked_AWriteGivesUpAfterTheBusyTimeout) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  StoreOptions o;
  o.database = url;
  o.busy_timeout = std::chrono::milliseconds(500);
  auto s = open_store(o);
  ASSERT_TRUE(s) << s.error().to_string();
  auto insert = [&] { return insert_a_job(**s); };
  auto holder = connect(pg_options(url));
  ASSERT_TRUE(holder) << holder.error().to_string();
  ASSERT_TRUE(holder->exec("BEGIN; LOCK TABLE ratchet_jobs IN ACCESS EXCLUSIVE MODE"));
  const auto t0 = std::chrono::steady_clock::now();
  auto blocked = insert();
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(blocked) << "the table is locked";
  EXPECT_LT(waited, std::chrono::seconds(5)) << "gave up after about the busy timeout";
  EXPECT_TRUE(contains(blocked.error().message(), "lock")) << blocked.error().message();
  ASSERT_TRUE(holder->exec("COMMIT"));
  auto after = insert();
  EXPECT_TRUE(after) << after.error().to_string();
}

// A table dropped or renamed under a running engine refused every write,
// and the run logged five errors a second for ever: waiting cures it no
// more than a full disk, so the run's write failure says so and it stops.
TEST_F(PgStoreOpen, ATableGone_WritesFailAsTheDiskFullDoesNamingTheTable) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  StoreOptions o;
  o.database = url;
  o.busy_timeout = std::chrono::milliseconds(200);
  auto s = open_store(o);
  ASSERT_TRUE(s) << s.error().to_string();
  auto admin = connect(pg_options(url));
  ASSERT_TRUE(admin);
  ASSERT_TRUE(admin->exec("ALTER TABLE ratchet_jobs RENAME TO ratchet_jobs_elsewhere"));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(insert_a_job(**s));
  auto failure = (*s)->write_failure(3, std::chrono::seconds(0));
  ASSERT_TRUE(failure) << "a write the schema refuses is one waiting does not cure";
  EXPECT_TRUE(contains(failure->message(), "ratchet_jobs")) << failure->message();
}

// Opened, a schema whose table was renamed by hand let a run start and
// stopped it at its first write, seconds later.
TEST_F(PgStoreOpen, ATableGoneBeforeOpening_RefusedAtOpenNamingIt) {
  const std::string url = ratchet::testing::fresh_postgres_schema();
  StoreOptions o;
  o.database = url;
  {
    auto s = open_store(o);
    ASSERT_TRUE(s) << s.error().to_string();
  }
  auto admin = connect(pg_options(url));
  ASSERT_TRUE(admin);
  ASSERT_TRUE(admin->exec("ALTER TABLE ratchet_steps RENAME TO ratchet_steps_elsewhere"));
  auto s = open_store(o);
  ASSERT_FALSE(s) << "opened a schema without its ratchet_steps table";
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  EXPECT_TRUE(contains(s.error().message(), "ratchet_steps are missing")) << s.error().message();
  ASSERT_TRUE(admin->exec("ALTER TABLE ratchet_steps_elsewhere RENAME TO ratchet_steps"));
  EXPECT_TRUE(open_store(o)) << "whole again, it opens";
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
