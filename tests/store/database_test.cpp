// The SQLite backend's own cases: the file, its mode, its locks. What every
// backend does on opening (the schema version, a database that is too new or
// not ratchet's) is in the conformance suite (schema_test.cpp).
#include "store/sqlite/database.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <SQLiteCpp/Database.h>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>

#include "store/sqlite/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace ratchet::store {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

DatabaseOptions opts(const std::filesystem::path& p) {
  DatabaseOptions o;
  o.path = p;
  o.busy_timeout = std::chrono::milliseconds(100);
  return o;
}

TEST(OpenDatabase, NewFile_CreatedPrivateWithWalAndCurrentSchema) {
  testing::TempDir dir;
  auto db = open_database(opts(dir.file("a.db")));
  ASSERT_TRUE(db) << db.error().to_string();
  struct stat sb {};
  ASSERT_EQ(::stat(dir.file("a.db").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600);
  EXPECT_EQ((*db)->execAndGet("PRAGMA journal_mode").getString(), "wal");
  EXPECT_EQ((*db)->execAndGet("PRAGMA synchronous").getInt(), 1);  // NORMAL
  EXPECT_TRUE((*db)->tableExists("limiter_state"));
  EXPECT_TRUE((*db)->tableExists("limiter_calls"));
  EXPECT_TRUE((*db)->tableExists("job_timeline"));
}

TEST(OpenDatabase, SynchronousFull_SetsFull) {
  testing::TempDir dir;
  auto o = opts(dir.file("a.db"));
  o.synchronous_full = true;
  auto db = open_database(o);
  ASSERT_TRUE(db);
  EXPECT_EQ((*db)->execAndGet("PRAGMA synchronous").getInt(), 2);
}

TEST(OpenDatabase, ReadOnlyFile_ClearError) {
  testing::TempDir dir;
  auto path = dir.file("ro.db");
  ASSERT_TRUE(open_database(opts(path)));
  std::filesystem::remove(dir.file("ro.db-wal"));
  std::filesystem::remove(dir.file("ro.db-shm"));
  ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
  std::string before = slurp(path);
  auto db = open_database(opts(path));
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(db.error().message().find("read-only"), std::string::npos) << db.error().message();
  EXPECT_EQ(slurp(path), before);
}

TEST(OpenDatabase, MissingFolder_ClearError) {
  testing::TempDir dir;
  auto db = open_database(opts(dir.file("no/such/folder/a.db")));
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(db.error().message().find("folder"), std::string::npos) << db.error().message();
}

TEST(OpenDatabase, ExclusivelyLocked_ClearLockedError) {
  testing::TempDir dir;
  auto path = dir.file("locked.db");
  ASSERT_TRUE(open_database(opts(path)));
  SQLite::Database other(path.string(), SQLite::OPEN_READWRITE);
  other.exec("PRAGMA locking_mode=EXCLUSIVE");
  other.exec("BEGIN EXCLUSIVE");
  other.exec("INSERT INTO limiter_calls VALUES ('k', 1)");
  auto db = open_database(opts(path));
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(db.error().message().find("locked"), std::string::npos) << db.error().message();
  other.exec("ROLLBACK");
}

// A store whose database another connection holds the write lock of.
class StoreWriteLocked : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = opts(path_);
    o.clock = clock_;
    auto s = SqliteStore::open(o);
    ASSERT_TRUE(s) << s.error().to_string();
    store_ = std::move(*s);
    other_.exec("BEGIN IMMEDIATE");
  }
  std::size_t jobs() {
    auto n = store_->read([](JobStore& s) { return s.list({}).size(); });
    EXPECT_TRUE(n);
    return n ? *n : 0;
  }

  // A write under a lease, on its own thread: the id it inserted, or its error.
  std::future<Result<JobId>> write_under_lease(TimePoint lease_until) {
    return std::async(std::launch::async, [this, lease_until] {
      return store_->write_under_lease(lease_until, [](JobStore& s) {
        NewJob j{"t", "default", "{}", 0, 0, 1, ""};
        return s.insert(j, 1).id;
      });
    });
  }

  testing::TempDir dir_;
  std::filesystem::path path_ = dir_.file("busy.db");
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::unique_ptr<Store> store_;
  SQLite::Database other_{path_.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE};
};

TEST_F(StoreWriteLocked, Write_FailsWithLockedAndWritesNothing) {
  auto r = store_->write([](JobStore& s) {
    NewJob j{"t", "default", "{}", 0, 0, 1, ""};
    return s.insert(j, 1).id;
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(r.error().message().find("locked"), std::string::npos) << r.error().message();
  other_.exec("ROLLBACK");
  EXPECT_EQ(jobs(), 0u);
}

// The lock is another connection's, held in real time: these tests wait a few
// busy timeouts (100 ms each) of it. Leases are on the fake clock.
TEST_F(StoreWriteLocked, WriteUnderLease_LockedPastTheBusyTimeout_RetriedAndCommittedOnceReleased) {
  auto w = write_under_lease(clock_->now() + std::chrono::seconds(30));
  EXPECT_EQ(w.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "the write waits while its lease lasts, five busy timeouts here";
  EXPECT_TRUE(store_->stalled());
  other_.exec("ROLLBACK");
  auto id = w.get();
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(jobs(), 1u);
  EXPECT_FALSE(store_->stalled());
}

TEST_F(StoreWriteLocked, WriteUnderLease_LeaseExpiresWhileLocked_GivenUpSayingSoAndNothingWritten) {
  auto w = write_under_lease(clock_->now() + std::chrono::seconds(30));
  EXPECT_EQ(w.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  clock_->advance(std::chrono::seconds(30));
  ASSERT_EQ(w.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "given up at the next attempt once the lease is over";
  auto id = w.get();
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(id.error().message().find("locked"), std::string::npos) << id.error().message();
  EXPECT_NE(id.error().message().find("lease"), std::string::npos) << id.error().message();
  other_.exec("ROLLBACK");
  EXPECT_EQ(jobs(), 0u);
}

TEST_F(StoreWriteLocked, Write_WithoutLeaseQueuedDuringAStall_FailsAfterTheBusyTimeout) {
  auto leased = write_under_lease(clock_->now() + std::chrono::seconds(30));
  while (!store_->stalled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto plain = store_->write([](JobStore& s) {
    NewJob j{"t", "default", "{}", 0, 0, 1, ""};
    return s.insert(j, 1).id;
  });
  ASSERT_FALSE(plain) << "an enqueue is refused, not kept waiting for the lock";
  EXPECT_NE(plain.error().message().find("locked"), std::string::npos) << plain.error().message();
  other_.exec("ROLLBACK");
  ASSERT_TRUE(leased.get());
  EXPECT_EQ(jobs(), 1u);
}

TEST(StoreWriteAsync, Queued_DoneRunsOnceCommittedAndReadersSeeTheChange) {
  testing::TempDir dir;
  auto store = SqliteStore::open(opts(dir.file("async.db")));
  ASSERT_TRUE(store) << store.error().to_string();
  std::promise<std::optional<Error>> done;
  JobId id = 0;
  (*store)->write_async(
      [&](JobStore& s) {
        NewJob j{"t", "default", "{}", 0, 0, 1, ""};
        id = s.insert(j, 1).id;
      },
      [&](std::optional<Error> e) { done.set_value(std::move(e)); });
  auto error = done.get_future().get();
  EXPECT_FALSE(error) << error->to_string();
  auto j = (*store)->read([&](JobStore& s) { return s.get(id); });
  ASSERT_TRUE(j);
  ASSERT_TRUE(*j) << "the job must be committed when done runs";
  EXPECT_EQ((*j)->type, "t");
}

TEST_F(StoreWriteLocked, WriteAsync_DoneGetsTheErrorAndNothingIsWritten) {
  std::promise<std::optional<Error>> done;
  store_->write_async(
      [](JobStore& s) {
        NewJob j{"t", "default", "{}", 0, 0, 1, ""};
        s.insert(j, 1);
      },
      [&](std::optional<Error> e) { done.set_value(std::move(e)); });
  auto error = done.get_future().get();
  other_.exec("ROLLBACK");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), ErrorCode::kDatabase);
  EXPECT_NE(error->message().find("locked"), std::string::npos) << error->message();
  EXPECT_EQ(jobs(), 0u);
}

}  // namespace
}  // namespace ratchet::store
