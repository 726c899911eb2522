// A WAL lock race lost for a while: SQLite answers SQLITE_PROTOCOL ("locking
// protocol") when a connection cannot take a shared lock on the WAL index
// after about a hundred tries, as when another process is recovering the
// index after a crash, and its advice is to try again. A write the store is
// asked to make then waits and is made, as for a database locked by another
// process; it does not fail.
//
// The race is made by a VFS over the default one that refuses shared locks
// on the WAL index (SQLITE_BUSY) while armed, and does not sleep between
// SQLite's own tries, so that each lost race takes milliseconds.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "store/sqlite/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace ratchet::store {
namespace {

std::atomic<bool> g_armed{false};
std::atomic<int> g_refused{0};
sqlite3_vfs* g_real = nullptr;
const sqlite3_io_methods* g_real_methods = nullptr;
sqlite3_io_methods g_methods{};

int race_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  if (g_armed.load() && (flags & SQLITE_SHM_SHARED) != 0 && (flags & SQLITE_SHM_LOCK) != 0) {
    g_refused.fetch_add(1);
    return SQLITE_BUSY;
  }
  return g_real_methods->xShmLock(f, offset, n, flags);
}

// The file is the real VFS's own; only its method table is swapped, for one
// whose shared-memory lock can lose the race.
int race_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  const int rc = g_real->xOpen(g_real, name, f, flags, out_flags);
  if (rc != SQLITE_OK || f->pMethods == nullptr || f->pMethods->xShmLock == nullptr) return rc;
  if (g_real_methods == nullptr) {
    g_real_methods = f->pMethods;
    g_methods = *f->pMethods;
    g_methods.xShmLock = race_shm_lock;
  }
  if (f->pMethods == g_real_methods) f->pMethods = &g_methods;
  return rc;
}

int no_sleep(sqlite3_vfs* vfs, int us) { return g_armed.load() ? us : g_real->xSleep(vfs, us); }

// Registered as the default VFS for the test's life.
class RaceVfs {
 public:
  RaceVfs() {
    g_real = sqlite3_vfs_find(nullptr);
    vfs_ = *g_real;
    vfs_.zName = "ratchet_wal_lock_race";
    vfs_.xOpen = race_open;
    vfs_.xSleep = no_sleep;
    sqlite3_vfs_register(&vfs_, 1);
  }
  ~RaceVfs() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(g_real, 1);
  }

 private:
  sqlite3_vfs vfs_{};
};

TEST(SqliteWalLockRace, AWriteUnderALeaseThatLosesTheRace_IsMadeOnceTheRaceIsOver) {
  RaceVfs vfs;
  testing::TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  DatabaseOptions o;
  o.path = dir.file("race.db");
  o.busy_timeout = std::chrono::milliseconds(100);
  o.clock = clock;
  auto opened = SqliteStore::open(o);
  ASSERT_TRUE(opened) << opened.error().to_string();
  std::unique_ptr<Store> store = std::move(*opened);

  g_refused = 0;
  g_armed = true;
  auto written = std::async(std::launch::async, [&] {
    return store->write_under_lease(clock->now() + std::chrono::seconds(30), [](JobStore& s) {
      NewJob j{"t", "default", "{}", 0, 0, 1, ""};
      return s.insert(j, 1).id;
    });
  });
  // SQLite gives up after about a hundred refusals: two lost races at least.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (g_refused.load() < 250 && std::chrono::steady_clock::now() < deadline &&
         written.wait_for(std::chrono::milliseconds(1)) == std::future_status::timeout) {
  }
  const int refused = g_refused.load();
  g_armed = false;
  EXPECT_GE(refused, 250) << "the race was lost for long enough";
  auto id = written.get();
  ASSERT_TRUE(id) << "a lost WAL lock race is waited out like a lock: " << id.error().to_string();
  auto n = store->read([](JobStore& s) { return s.list({}).size(); });
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 1u);
}

}  // namespace
}  // namespace ratchet::store
