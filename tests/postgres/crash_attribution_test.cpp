// A job whose step crashes its process (SIGSEGV) beside slow jobs, run by
// worker processes restarted after each crash as a supervisor would, on
// each backend: the crash is charged to that job alone (it ends dead after
// max_lease_expiries crashes, its error naming the signal), and the jobs
// that ran beside it are never even suspects and all complete. Children are
// the ratchet_engine_test_worker helper of tests/runtime.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>

#include "child_process.hpp"
#include "fresh_schema.hpp"
#include "store/job_store.hpp"
#include "store/open_store.hpp"
#include "temp_dir.hpp"

namespace ratchet::testing {
namespace {

using namespace std::chrono_literals;

pid_t spawn(const std::vector<std::string>& args) { return spawn_program(RATCHET_TEST_WORKER, args); }

// How a child ended: its exit code, or 128 + the signal that killed it.
int wait_status(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

class CrashAttribution : public ::testing::TestWithParam<std::string> {};

TEST_P(CrashAttribution, StepCrashesItsProcessBesideOthers_OnlyItIsChargedAndEndsDead) {
  constexpr int kSlow = 3;
  TempDir dir;
  const std::string db = GetParam() == "postgres" ? fresh_postgres_schema() : dir.file("jobs.db").string();
  const auto runs = dir.file("runs.txt");
  ASSERT_EQ(wait_exit(spawn({db, "enqueue-crash", std::to_string(kSlow)}), 60s), 0);

  // Restarted after each crash, until a run drains every job.
  int crashes = 0;
  int last = -1;
  for (int round = 0; round < 12; ++round) {
    last = wait_status(spawn({db, "work", runs.string(), "1000"}));
    if (last == 0) break;
    ++crashes;
  }
  ASSERT_EQ(last, 0) << "the workers never drained the jobs; last status " << last;
  EXPECT_EQ(crashes, 3) << "the job is dead after max_lease_expiries (3) crashes charged to it";

  store::StoreOptions o;
  o.database = db;
  auto s = store::open_store(o);
  ASSERT_TRUE(s) << s.error().to_string();
  auto jobs = (*s)->read([](store::JobStore& js) { return js.list({}); });
  ASSERT_TRUE(jobs) << jobs.error().to_string();
  ASSERT_EQ(jobs->size(), static_cast<std::size_t>(kSlow + 1));
  int ran_beside = 0;
  for (const auto& listed : *jobs) {
    auto j = (*s)->read([&](store::JobStore& js) { return js.get(listed.id); });
    ASSERT_TRUE(j && j->has_value());
    const JobRecord& job = **j;
    if (job.type == "crash") {
      EXPECT_EQ(job.state, JobState::kDead);
      EXPECT_NE(job.last_error.find("crashed (SIGSEGV) in this job's step (3 of 3)"), std::string::npos)
          << job.last_error;
      continue;
    }
    EXPECT_EQ(job.state, JobState::kCompleted) << "job " << job.id;
    EXPECT_EQ(job.attempt, 1) << "job " << job.id << ": a crash beside it does not use up its attempt";
    // A slow job claimed while the crashing one waits out its backoff may
    // finish between two crashes; the others ran beside one.
    if (!job.errors.empty()) ++ran_beside;
    for (const auto& e : job.errors) {
      EXPECT_NE(e.error.find("crashed (SIGSEGV) in job"), std::string::npos) << e.error;
      EXPECT_NE(e.error.find("not in this one"), std::string::npos) << e.error;
    }
  }
  // An instrumented process may not claim the slow jobs within the crashing
  // step's wait (seen in a fresh ASan build): then attribution beside other
  // jobs was not exercised, which is reported, not passed.
  if (ran_beside == 0) GTEST_SKIP() << "no slow job ran beside a crash in this run";
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Backends, CrashAttribution, ::testing::Values("sqlite", "postgres"), backend_name);

}  // namespace
}  // namespace ratchet::testing
