// The engine's clock: continuous, and one timeline for every process of a
// boot that shares the database, so a wall-clock step moves no wait, lease
// or limit.
#include <SQLiteCpp/Database.h>

#include <thread>

#include "engine_fixture.hpp"
#include "runtime/clock_watch.hpp"

namespace ratchet::testing {
namespace {

std::int64_t ns(Duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

Duration distance(TimePoint a, TimePoint b) { return a > b ? a - b : b - a; }

TEST(SystemClock_Anchor, ReadsTheBootTimeClockPlusTheBaseNotTheWallClock) {
  SystemClock clock;
  clock.anchor(SystemClock::wall_base() - 1h);
  EXPECT_LT(distance(clock.now(), std::chrono::system_clock::now() - 1h), 1s);
  // A wait on a clock an hour behind the wall clock lasts what it says.
  std::stop_source stop;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(clock.wait_for(20ms, stop.get_token()));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 20ms);
  EXPECT_LT(waited, 5s);
}

TEST(SystemClock_Anchor, UnanchoredClockReadsTheWallClock) {
  SystemClock clock;
  EXPECT_LT(distance(clock.now(), std::chrono::system_clock::now()), 1s);
  EXPECT_LT(distance(TimePoint{} + clock.base(), TimePoint{} + SystemClock::wall_base()), 1s);
}

TEST(ClockWatch_Check, ReportsTheWallClocksLeadOverASteppedClock) {
  SystemClock clock;
  clock.anchor(SystemClock::wall_base() - 1h);
  runtime::ClockWatch watch;
  EXPECT_LT(distance(TimePoint{} + watch.check(clock), TimePoint{} + Duration(1h)), 1s);
  FakeClock fake;
  EXPECT_EQ(watch.check(fake), Duration::zero());
}

class ClockAnchorTest : public EngineFixture {
 protected:
  EngineOptions system_options() {
    EngineOptions o = options();
    o.clock = nullptr;  // the engine's own SystemClock
    return o;
  }
};

TEST_F(ClockAnchorTest, SecondEngineOfABoot_ReadsTheTimelineTheDatabaseHolds) {
  if (SystemClock::boot_id().empty()) GTEST_SKIP() << "no boot id on this system";
  {
    auto first = open(system_options());
    ASSERT_TRUE(first);
  }
  // As if the wall clock had stepped an hour forward since the first process
  // of this boot opened the database.
  {
    SQLite::Database db(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE);
    SQLite::Statement q(db, "UPDATE machine_clock SET base_ns = ? WHERE boot_id = ?");
    q.bind(1, ns(SystemClock::wall_base() - 1h));
    q.bind(2, SystemClock::boot_id());
    ASSERT_EQ(q.exec(), 1);
  }
  auto second = open(system_options());
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->define("t", [](StepContext&) { return nlohmann::json(); }));
  auto id = second->enqueue("t", nlohmann::json::object());
  ASSERT_TRUE(id) << id.error().to_string();
  auto job = second->get(*id);
  ASSERT_TRUE(job);
  // Dated on the database's timeline, an hour behind the wall clock: the
  // leases and parks of the first process stay as long as they were.
  EXPECT_LT(distance(job->created_at, std::chrono::system_clock::now() - 1h), 5s);
}

TEST_F(ClockAnchorTest, EngineOfANewBoot_ReplacesTheOldBase) {
  if (SystemClock::boot_id().empty()) GTEST_SKIP() << "no boot id on this system";
  {
    auto first = open(system_options());
    ASSERT_TRUE(first);
  }
  {
    SQLite::Database db(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE);
    SQLite::Statement q(db, "UPDATE machine_clock SET boot_id = 'an-earlier-boot', base_ns = ?");
    q.bind(1, ns(SystemClock::wall_base() - 1h));
    ASSERT_EQ(q.exec(), 1);
  }
  auto second = open(system_options());
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->define("t", [](StepContext&) { return nlohmann::json(); }));
  auto id = second->enqueue("t", nlohmann::json::object());
  ASSERT_TRUE(id);
  auto job = second->get(*id);
  ASSERT_TRUE(job);
  EXPECT_LT(distance(job->created_at, std::chrono::system_clock::now()), 5s);
  SQLite::Database db(dir_.file("engine.db").string(), SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM machine_clock").getInt(), 1);
  EXPECT_EQ(db.execAndGet("SELECT boot_id FROM machine_clock").getString(), SystemClock::boot_id());
}

}  // namespace
}  // namespace ratchet::testing
