// Many machines, simulated: 1, 4 and 8 worker processes on one PostgreSQL
// database, each killed with SIGKILL at moments a seed chooses and replaced
// by a new one, as hosts die and come back. Every job must end completed,
// and no step whose checkpoint was committed may run again (each step asks
// the database before it runs and reports a violation). Children are the
// ratchet_engine_test_worker helper of tests/runtime.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "fresh_schema.hpp"
#include "temp_dir.hpp"
#include "worker_runs.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;

pid_t spawn(const std::vector<std::string>& args) { return spawn_program(RATCHET_TEST_WORKER, args); }

std::int64_t count(store::pg::Connection& c, const std::string& sql) {
  auto rows = c.exec(sql);
  EXPECT_TRUE(rows) << rows.error().to_string();
  return rows ? *rows->get_int64(0, 0) : -1;
}

struct Case {
  int workers;
  std::uint32_t seed;
};

class ManyWorkers : public ::testing::TestWithParam<Case> {};

TEST_P(ManyWorkers, KilledAndReplacedAtRandom_EveryJobCompletedNoCommittedStepRunsAgain) {
  const auto [workers, seed] = GetParam();
  constexpr int kJobs = 120;
  TempDir dir;
  const std::string db = fresh_postgres_schema();
  const auto runs = dir.file("runs.txt");
  ASSERT_EQ(wait_exit(spawn({db, "enqueue", std::to_string(kJobs)}), 60s), 0);

  std::mt19937 rng(seed);
  const auto lease = "1000";  // ms: a killed worker's jobs are taken over a second later
  std::vector<pid_t> live;
  for (int i = 0; i < workers; ++i) live.push_back(spawn({db, "work", runs.string(), lease}));
  const int kills = 2 + workers;
  std::uniform_int_distribution<int> pause_ms(50, 400);
  int done_kills = 0;
  for (; done_kills < kills; ++done_kills) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    std::uniform_int_distribution<std::size_t> pick(0, live.size() - 1);
    const std::size_t i = pick(rng);
    int status = 0;
    if (::waitpid(live[i], &status, WNOHANG) == live[i]) {  // the work ran out already
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a worker failed";
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    ::kill(live[i], SIGKILL);
    ::waitpid(live[i], &status, 0);
    live[i] = spawn({db, "work", runs.string(), lease});
  }
  for (pid_t pid : live) EXPECT_EQ(wait_exit(pid, 120s), 0);

  Runs r = read_runs(runs);
  std::size_t total = 0;
  for (const auto& [key, n] : r.count) total += n;
  std::printf("workers %d seed %u: %d kills, %zu step runs for %d steps\n", workers, seed, done_kills, total,
              kJobs * 5);
  EXPECT_TRUE(r.violations.empty()) << r.violations.size() << " committed steps ran again, e.g. "
                                    << (r.violations.empty() ? "" : r.violations.front());
  EXPECT_EQ(r.count.size(), static_cast<std::size_t>(kJobs * 5)) << "every step ran at least once";

  auto c = store::pg::connect({db, std::nullopt, std::chrono::seconds(10)});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_jobs"), kJobs);
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_jobs WHERE state = 'completed'"), kJobs);
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_steps WHERE state = 'completed'"), kJobs * 5);
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_jobs WHERE result <> '[0,1,2,3,4]'"), 0);
}

// A failover: the server restarts while four workers run, cutting every
// session. Writes under a lease wait for it and go on; no job is lost and
// no committed step runs again.
TEST(ServerRestart, DuringARun_EveryJobCompletedNoCommittedStepRunsAgain) {
  constexpr int kJobs = 400;
  TempDir dir;
  const std::string db = fresh_postgres_schema();
  std::string why;
  const auto env = load_pg_test_env(why);
  ASSERT_TRUE(env) << why;
  const auto runs = dir.file("runs.txt");
  ASSERT_EQ(wait_exit(spawn({db, "enqueue", std::to_string(kJobs)}), 60s), 0);
  std::vector<pid_t> live;
  for (int i = 0; i < 4; ++i) live.push_back(spawn({db, "work", runs.string(), "5000"}));
  // Once every worker runs steps: a process that starts while the server is
  // down is refused at open (a clear error, exit 1), which is not what this
  // test is about.
  const auto started = std::chrono::steady_clock::now();
  while (read_runs(runs).pids.size() < live.size() && std::chrono::steady_clock::now() - started < 30s) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(read_runs(runs).pids.size(), live.size()) << "every worker ran a step within 30 s";
  const std::string restart = env->cluster_script() + " restart " + env->dir;
  ASSERT_EQ(std::system(restart.c_str()), 0) << restart;
  for (pid_t pid : live) EXPECT_EQ(wait_exit(pid, 120s), 0);

  Runs r = read_runs(runs);
  EXPECT_TRUE(r.violations.empty()) << r.violations.size() << " committed steps ran again, e.g. "
                                    << (r.violations.empty() ? "" : r.violations.front());
  EXPECT_EQ(r.count.size(), static_cast<std::size_t>(kJobs * 5)) << "every step ran at least once";
  auto c = store::pg::connect({db, std::nullopt, std::chrono::seconds(10)});
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_jobs WHERE state = 'completed'"), kJobs);
  EXPECT_EQ(count(*c, "SELECT COUNT(*) FROM ratchet_steps WHERE state = 'completed'"), kJobs * 5);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int workers : {1, 4, 8}) {
    for (std::uint32_t seed : {11u, 23u, 37u, 41u, 59u}) out.push_back({workers, seed});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Seeds, ManyWorkers, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::to_string(param_info.param.workers) + "workers_seed" +
                                  std::to_string(param_info.param.seed);
                         });

}  // namespace
}  // namespace ratchet::testing
