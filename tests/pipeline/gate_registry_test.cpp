// A declared limit holds across a reload and a restart (docs/semantics.md points 5
// and 11): the server keeps counting the calls made before either, so the
// gates built after them admit only what fits with those calls counted.
// Driven by a FakeClock; admissions are counted at one instant.
#include "pipeline/gate_registry.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <variant>

#include "config/load.hpp"
#include "limit/micros.hpp"
#include "store/sqlite/database.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"

namespace ratchet::pipeline {
namespace {

using namespace std::chrono_literals;

// A migrated database file, removed with the object.
class DatabaseFile {
 public:
  DatabaseFile() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("ratchet-gates-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".db");
    remove();
    store::DatabaseOptions o;
    o.path = path_;
    auto db = store::open_database(o);
    EXPECT_TRUE(db.has_value()) << db.error().to_string();
  }
  ~DatabaseFile() { remove(); }
  DatabaseFile(const DatabaseFile&) = delete;
  DatabaseFile& operator=(const DatabaseFile&) = delete;

  limit::ConnectionFactory connect() const {
    return store::sqlite_limiter_tables(path_, std::chrono::seconds(5));
  }

 private:
  void remove() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path_.string() + suffix, ec);
  }
  std::filesystem::path path_;
};

config::ConfigPtr config_with(const std::string& imdb) {
  auto loaded =
      config::load_string("[plugin.imdb]\nbase_url = \"http://127.0.0.1:1/imdb\"\n" + imdb, "test.toml");
  EXPECT_TRUE(loaded.has_value());
  return loaded ? *loaded : nullptr;
}

const std::string kTenPerSecond = "[[plugin.imdb.limit]]\nrate = 10\nper = \"1s\"\n";
const std::string kFivePerSecond = "[[plugin.imdb.limit]]\nrate = 5\nper = \"1s\"\n";

class GateRegistryLimits : public ::testing::Test {
 protected:
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();

  // How many new steps the gate of imdb.get_rating lets start now, up to `most`.
  int admitted_now(GateRegistry& gates, int most = 100) {
    auto gate = gates.gate("imdb", "get_rating");
    EXPECT_TRUE(gate.has_value()) << gate.error().to_string();
    if (!gate) return -1;
    int n = 0;
    for (; n < most; ++n) {
      retry::CallState step(clock->now());
      auto a = (*gate)->admit(step, clock->now());
      if (!std::holds_alternative<retry::CallGate::Go>(a)) break;
    }
    return n;
  }

  // How many steps of one account, under a limit keyed by account, start
  // within the next 100 ms (the learned pace spaces a plugin's first calls
  // by a few ms); the clock ends where the last one started.
  int admitted_soon_for(GateRegistry& gates, const std::string& account) {
    auto gate = gates.gate("imdb", "get_rating");
    EXPECT_TRUE(gate.has_value()) << gate.error().to_string();
    if (!gate) return -1;
    const TimePoint until = clock->now() + 100ms;
    for (int n = 0; n < 100; ++n) {
      retry::CallState step(clock->now());
      EXPECT_TRUE((*gate)->bind_keys(step, {{"account", account}}, nlohmann::json::object()));
      for (;;) {
        auto a = (*gate)->admit(step, clock->now());
        if (auto* go = std::get_if<retry::CallGate::Go>(&a)) {
          (void)(*gate)->record(step, std::move(go->ticket), retry::Outcome::ok(), {}, clock->now());
          break;
        }
        auto* w = std::get_if<retry::CallGate::Wait>(&a);
        if (w == nullptr || !w->until || *w->until > until) return n;
        clock->set(*w->until);
      }
    }
    return 100;
  }

  // When a new step could start, as seen from now.
  TimePoint next_start(GateRegistry& gates) {
    auto gate = gates.gate("imdb", "get_rating");
    EXPECT_TRUE(gate.has_value());
    retry::CallState step(clock->now());
    auto a = (*gate)->admit(step, clock->now());
    if (std::holds_alternative<retry::CallGate::Go>(a)) return clock->now();
    auto* w = std::get_if<retry::CallGate::Wait>(&a);
    EXPECT_TRUE(w != nullptr && w->until.has_value());
    return w && w->until ? *w->until : TimePoint{};
  }
};

TEST_F(GateRegistryLimits, ReloadChangingOnlyTheRetryPolicy_KeepsTheLimitersWindow) {
  GateRegistry gates(config_with(kTenPerSecond), {}, 1, clock);
  EXPECT_EQ(admitted_now(gates), 10);
  gates.reconfigure(config_with(kTenPerSecond + "[plugin.imdb.retry]\nattempts = 7\n"));
  EXPECT_EQ(admitted_now(gates), 0) << "the 10 calls of this second still count";
  clock->advance(1100ms);
  EXPECT_EQ(admitted_now(gates), 10);
}

TEST_F(GateRegistryLimits, ReloadLoweringTheRate_AdmitsOnlyWhatFitsWithTheCallsAlreadyCounted) {
  GateRegistry gates(config_with(kTenPerSecond), {}, 1, clock);
  EXPECT_EQ(admitted_now(gates, 3), 3);
  gates.reconfigure(config_with(kFivePerSecond));
  EXPECT_EQ(admitted_now(gates), 2) << "5 per second, 3 already made";
  clock->advance(500ms);
  EXPECT_EQ(admitted_now(gates), 0);
  clock->advance(600ms);
  EXPECT_EQ(admitted_now(gates), 5);
}

TEST_F(GateRegistryLimits, ReloadRaisingTheRate_StartsFromTheCallsAlreadyCounted) {
  GateRegistry gates(config_with(kFivePerSecond), {}, 1, clock);
  EXPECT_EQ(admitted_now(gates), 5);
  gates.reconfigure(config_with("[[plugin.imdb.limit]]\nrate = 8\nper = \"1s\"\n"));
  EXPECT_EQ(admitted_now(gates), 3);
}

TEST_F(GateRegistryLimits, NewProcessOnTheSameDatabase_AdmitsNoneUntilTheWindowAllows) {
  DatabaseFile db;
  const TimePoint first = clock->now();
  {
    GateRegistry before(config_with(kTenPerSecond), db.connect(), 1, clock);
    EXPECT_EQ(admitted_now(before), 10);
  }  // the process stops
  clock->advance(300ms);
  GateRegistry after(config_with(kTenPerSecond), db.connect(), 2, clock);
  EXPECT_EQ(admitted_now(after), 0) << "the server still counts the 10 calls of the process before";
  EXPECT_GE(next_start(after), first + 1s);
  // Past the window, its jitter margin (50 ms) and the slack slots are
  // granted with (25 ms).
  clock->set(first + 1s + 80ms);
  EXPECT_EQ(admitted_now(after), 10);
}

TEST_F(GateRegistryLimits, NewProcessOnTheSameDatabase_EachKeyOfAKeyedLimitResumesItsOwnWindow) {
  DatabaseFile db;
  const std::string per_account =
      "[[plugin.imdb.limit]]\nrate = 3\nper = \"1s\"\nkey = \"{{args.account}}\"\n";
  const TimePoint first = clock->now();
  {
    GateRegistry before(config_with(per_account), db.connect(), 1, clock);
    EXPECT_EQ(admitted_soon_for(before, "alice"), 3);
  }  // the process stops
  clock->advance(300ms);
  GateRegistry after(config_with(per_account), db.connect(), 2, clock);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 0) << "the server still counts alice's 3 calls";
  EXPECT_EQ(admitted_soon_for(after, "carol"), 3) << "a key of its own";
  // Past the window, its jitter margin (50 ms) and the slack slots are
  // granted with (25 ms).
  clock->set(first + 1s + 80ms);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 3);
}

std::string per_account(int rate, const std::string& per = "1s") {
  return "[[plugin.imdb.limit]]\nrate = " + std::to_string(rate) + "\nper = \"" + per +
         "\"\nkey = \"{{args.account}}\"\n";
}

TEST_F(GateRegistryLimits, ReloadOfAKeyedLimit_EachKeyKeepsTheCallsItMade) {
  DatabaseFile db;
  const TimePoint first = clock->now();
  GateRegistry gates(config_with(per_account(3)), db.connect(), 1, clock);
  EXPECT_EQ(admitted_soon_for(gates, "alice"), 3);
  gates.reconfigure(config_with(per_account(3) + "[plugin.imdb.retry]\nattempts = 7\n"));
  EXPECT_EQ(admitted_soon_for(gates, "alice"), 0) << "alice's 3 calls of this second still count";
  gates.reconfigure(config_with(per_account(5)));
  EXPECT_EQ(admitted_soon_for(gates, "alice"), 2) << "5 a second, 3 already made";
  // Changed again at once: the calls made under the first limit still count.
  gates.reconfigure(config_with(per_account(4)));
  EXPECT_EQ(admitted_soon_for(gates, "alice"), 0) << "4 a second, 5 already made";
  EXPECT_EQ(admitted_soon_for(gates, "carol"), 4) << "a key of its own";
  clock->set(first + 1s + 80ms);
  EXPECT_EQ(admitted_soon_for(gates, "alice"), 4);
}

TEST_F(GateRegistryLimits, NewProcessWithTheKeyedLimitChanged_EachKeyStillCountsItsCalls) {
  DatabaseFile db;
  const TimePoint first = clock->now();
  {
    GateRegistry before(config_with(per_account(3)), db.connect(), 1, clock);
    EXPECT_EQ(admitted_soon_for(before, "alice"), 3);
  }  // the process stops; the next one reads a config with a higher rate
  clock->advance(300ms);
  GateRegistry after(config_with(per_account(5)), db.connect(), 2, clock);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 2) << "5 a second, alice's 3 calls still counted";
  EXPECT_EQ(admitted_soon_for(after, "carol"), 5) << "a key of its own";
  clock->set(first + 1s + 80ms);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 3) << "the 2 calls after the restart still count";
}

TEST_F(GateRegistryLimits, TwoKeyedLimitsOverOneKey_CountEachCallOnceAcrossARestart) {
  DatabaseFile db;
  const std::string both = per_account(3) + per_account(5, "1m");
  {
    GateRegistry before(config_with(both), db.connect(), 1, clock);
    EXPECT_EQ(admitted_soon_for(before, "alice"), 3);
  }
  clock->advance(1100ms);  // past the 3 a second, not the 5 a minute
  GateRegistry after(config_with(both), db.connect(), 2, clock);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 2) << "alice's 3 calls count once against the 5 a minute";
}

TEST_F(GateRegistryLimits, ReloadDroppingOneOfTwoKeyedLimitsOverOneKey_TheOtherKeepsRecordingTheCalls) {
  DatabaseFile db;
  {
    GateRegistry gates(config_with(per_account(3) + per_account(5, "1m")), db.connect(), 1, clock);
    EXPECT_EQ(admitted_soon_for(gates, "alice"), 3);
    gates.reconfigure(config_with(per_account(5, "1m")));
    clock->advance(1100ms);
    EXPECT_EQ(admitted_soon_for(gates, "alice"), 2) << "5 a minute, 3 already made";
  }
  clock->advance(1100ms);
  GateRegistry after(config_with(per_account(5, "1m")), db.connect(), 2, clock);
  EXPECT_EQ(admitted_soon_for(after, "alice"), 0) << "all 5 of alice's calls this minute still count";
}

TEST_F(GateRegistryLimits, NewProcessAfterACrash_CountsTheCallsThatWereNotYetSaved) {
  DatabaseFile db;
  const TimePoint first = clock->now();
  // The first process never stops cleanly: it is still open when the next
  // one starts, as a killed one would have left the database.
  auto crashed = std::make_unique<GateRegistry>(config_with(kTenPerSecond), db.connect(), 1, clock);
  EXPECT_EQ(admitted_now(*crashed), 10);
  clock->advance(300ms);
  GateRegistry after(config_with(kTenPerSecond), db.connect(), 2, clock);
  EXPECT_EQ(admitted_now(after), 0);
  EXPECT_GE(next_start(after), first + 1s);
  clock->set(first + 2s);
  EXPECT_GT(admitted_now(after), 0);
}

TEST_F(GateRegistryLimits, ReloadKeepsADatabaseScopeLimit) {
  DatabaseFile db;
  const std::string shared = "[[plugin.imdb.limit]]\nrate = 4\nper = \"1s\"\nscope = \"database\"\n";
  GateRegistry gates(config_with(shared), db.connect(), 1, clock);
  EXPECT_EQ(admitted_now(gates), 4);
  gates.reconfigure(config_with(shared + "[plugin.imdb.retry]\nattempts = 2\n"));
  EXPECT_EQ(admitted_now(gates), 0);
}

std::string database_scope(int rate) {
  return "[[plugin.imdb.limit]]\nrate = " + std::to_string(rate) + "\nper = \"1s\"\nscope = \"database\"\n";
}

TEST_F(GateRegistryLimits, ReloadChangingADatabaseScopeLimitsRate_CountsTheCallsAlreadyMade) {
  DatabaseFile db;
  GateRegistry gates(config_with(database_scope(10)), db.connect(), 1, clock);
  EXPECT_EQ(admitted_now(gates), 10);
  gates.reconfigure(config_with(database_scope(12)));
  EXPECT_EQ(admitted_now(gates), 2) << "12 a second, 10 already made";
  gates.reconfigure(config_with(database_scope(8)));
  EXPECT_EQ(admitted_now(gates), 0) << "8 a second, 12 already made";
}

TEST_F(GateRegistryLimits, ProcessesRunningTheOldAndTheNewRateOfADatabaseScopeLimit_CountTheSameCalls) {
  DatabaseFile db;
  // A config change rolled out to one process and not yet to the other.
  GateRegistry old_rate(config_with(database_scope(10)), db.connect(), 1, clock);
  EXPECT_EQ(admitted_now(old_rate), 10);
  GateRegistry new_rate(config_with(database_scope(12)), db.connect(), 2, clock);
  EXPECT_EQ(admitted_now(new_rate), 2) << "12 a second, 10 already made by the process at 10";
  EXPECT_EQ(admitted_now(old_rate), 0);
  clock->advance(1100ms);
  EXPECT_EQ(admitted_now(old_rate), 10);
  EXPECT_EQ(admitted_now(new_rate), 2);
}

TEST_F(GateRegistryLimits, TwoDatabaseScopeLimitsOverOneWindow_EachCountsACallOnce) {
  DatabaseFile db;
  GateRegistry gates(config_with(database_scope(10) + database_scope(12)), db.connect(), 1, clock);
  EXPECT_EQ(admitted_now(gates), 10) << "the tighter decides, each call counted once in each";
}

}  // namespace
}  // namespace ratchet::pipeline
