// Several processes on one database file: a worker killed with SIGKILL at
// random moments and resumed by a new process, and two workers sharing the
// work. Children are the ratchet_engine_test_worker helper.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <SQLiteCpp/Database.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "temp_dir.hpp"
#include "worker_runs.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;

pid_t spawn(const std::vector<std::string>& args) { return spawn_program(RATCHET_TEST_WORKER, args); }

std::uintmax_t runs_size(const std::filesystem::path& p) {
  std::error_code ec;
  auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : n;
}

int pending(const std::filesystem::path& db_path) {
  SQLite::Database db(db_path.string(), SQLite::OPEN_READONLY, 5000);
  return db.execAndGet("SELECT COUNT(*) FROM jobs WHERE state <> 'completed'").getInt();
}

void expect_all_completed(const std::filesystem::path& db_path, int jobs) {
  SQLite::Database db(db_path.string(), SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM jobs").getInt(), jobs);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM jobs WHERE state = 'completed'").getInt(), jobs);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM steps WHERE state = 'completed'").getInt(), jobs * 5);
  EXPECT_EQ(db.execAndGet("SELECT COUNT(*) FROM jobs WHERE result <> '[0,1,2,3,4]'").getInt(), 0);
}

TEST(CrashTest, WorkerKilledAtRandomMoments_EveryJobCompletesNoCommittedStepRunsAgain) {
  TempDir dir;
  auto db = dir.file("crash.db");
  auto runs = dir.file("runs.txt");
  constexpr int kJobs = 900;  // enough that work is still pending at the last kill
  constexpr int kKills = 30;
  ASSERT_EQ(wait_exit(spawn({db.string(), "enqueue", std::to_string(kJobs)}), 30s), 0);
  std::mt19937 rng(20261129);
  std::uniform_int_distribution<int> delay_ms(0, 60);
  int killed_while_running = 0;
  for (int k = 0; k < kKills; ++k) {
    auto size_before = runs_size(runs);
    pid_t pid = spawn({db.string(), "work", runs.string(), "800"});
    ASSERT_GT(pid, 0);
    // Kill only once this process is running steps (bounded), so kills land
    // in the middle of work rather than during start-up on a slow machine.
    auto started = std::chrono::steady_clock::now();
    while (runs_size(runs) == size_before && std::chrono::steady_clock::now() - started < 5s) {
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == 0 && pending(db) > 0 && runs_size(runs) > size_before) {
      ++killed_while_running;
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_EQ(wait_exit(spawn({db.string(), "work", runs.string(), "800"}), 90s), 0);
  EXPECT_GE(killed_while_running, kKills / 2) << "most kills must land while the process is running steps";
  Runs r = read_runs(runs);
  std::size_t total = 0;
  for (const auto& [key, n] : r.count) total += n;
  std::printf("crash test: %d of %d kills with work pending, %zu step runs for %d steps, %zu processes\n",
              killed_while_running, kKills, total, kJobs * 5, r.pids.size());
  EXPECT_TRUE(r.violations.empty()) << r.violations.size() << " committed steps ran again, e.g. "
                                    << (r.violations.empty() ? "" : r.violations.front());
  EXPECT_EQ(r.count.size(), static_cast<std::size_t>(kJobs * 5)) << "every step ran at least once";
  expect_all_completed(db, kJobs);
}

TEST(MultiProcess, TwoWorkersOnOneDatabase_EveryJobCompletedExactlyOnce) {
  TempDir dir;
  auto db = dir.file("shared.db");
  auto runs = dir.file("runs.txt");
  constexpr int kJobs = 300;
  ASSERT_EQ(wait_exit(spawn({db.string(), "enqueue", std::to_string(kJobs)}), 30s), 0);
  pid_t a = spawn({db.string(), "work", runs.string(), "20000"});
  pid_t b = spawn({db.string(), "work", runs.string(), "20000"});
  EXPECT_EQ(wait_exit(a, 90s), 0);
  EXPECT_EQ(wait_exit(b, 90s), 0);
  Runs r = read_runs(runs);
  EXPECT_TRUE(r.violations.empty());
  ASSERT_EQ(r.count.size(), static_cast<std::size_t>(kJobs * 5));
  for (const auto& [key, n] : r.count) {
    EXPECT_EQ(n, 1) << "job " << key.first << " step " << key.second << " ran " << n << " times";
  }
  expect_all_completed(db, kJobs);
}

}  // namespace
}  // namespace ratchet::testing
