// The crash record in the quarantine: a crash signal's line in the store's
// crash record (an SQLite database's `<database>-crashes`; on PostgreSQL a
// file of this host's, Store::crash_record) names the job that crashed, so
// only it is counted. Conformance cases: each runs on every backend.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <set>

#include "backends.hpp"
#include "store/crash_record.hpp"
#include "store/job_store.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kSec = 1'000'000;
constexpr Micros kT0 = 1'700'000'000 * kSec;
constexpr Micros kLease = 30 * kSec;

class CrashRecordQuarantineTest : public testing::StoreBackendTest {
 protected:
  JobId add() {
    auto r = store_->write([&](JobStore& s) {
      return s.insert({"t", "default", R"({"n":1})", 0, kT0, 20, ""}, kT0);
    });
    EXPECT_TRUE(r);
    return r ? r->id : 0;
  }

  ClaimResult claim(const std::string& owner, Micros now, int limit) {
    ClaimRequest req{owner, now, now + kLease, limit, {"t"}, {}, 3};
    auto r = store_->write([&](JobStore& s) { return s.claim(req); });
    EXPECT_TRUE(r);
    return r ? std::move(*r) : ClaimResult{};
  }

  static std::set<JobId> ids(const ClaimResult& c) {
    std::set<JobId> out;
    for (const auto& j : c.jobs) out.insert(j.id);
    return out;
  }

  JobRecord job(JobId id) {
    auto r = store_->read([&](JobStore& s) { return s.get(id); });
    EXPECT_TRUE(r && r->has_value());
    return r && *r ? **r : JobRecord{};
  }

  int count(const std::string& where) { return count_jobs(where); }

  // What a crash signal's handler appends (store/crash_record.hpp).
  void record_crash(const std::string& owner, int sig, JobId job) {
    const std::filesystem::path record = store_->crash_record();
    ASSERT_FALSE(record.empty()) << backend().name << " keeps no crash record";
    std::filesystem::create_directories(record.parent_path());
    std::ofstream out(record, std::ios::app);
    out << owner << '\t' << sig << '\t' << job << '\n';
  }
};

TEST_P(CrashRecordQuarantineTest, CrashRecordNamesTheJob_OnlyItIsCountedAndItsNeighboursAreClear) {
  std::vector<JobId> all;
  for (int i = 0; i < 4; ++i) all.push_back(add());
  auto c = claim("w1", kT0, 4);
  ASSERT_EQ(c.jobs.size(), 4u);
  const JobId crasher = all[2];
  record_crash("w1", SIGSEGV, crasher);
  auto d = claim("w2", kT0 + kLease + kSec, 0);
  ASSERT_EQ(d.expired.size(), 4u);
  EXPECT_EQ(count("suspect = 1"), 1);
  EXPECT_EQ(count("crashes_alone = 1 AND suspect = 1 AND id = " + std::to_string(crasher)), 1);
  for (const auto& e : d.expired) {
    if (e.id == crasher) {
      EXPECT_NE(e.error.find("(SIGSEGV) in this job's step"), std::string::npos) << e.error;
    } else {
      EXPECT_NE(e.error.find("in job " + std::to_string(crasher) + ", not in this one"), std::string::npos)
          << e.error;
    }
  }
  EXPECT_EQ(count("resume = 1"), 3) << "the jobs beside it keep their attempt";
}

TEST_P(CrashRecordQuarantineTest, CrashRecordNamesTheJobKTimes_ItEndsDeadWhateverRanBesideIt) {
  std::vector<JobId> all;
  for (int i = 0; i < 4; ++i) all.push_back(add());
  const JobId crasher = all[0];
  Micros now = kT0;
  for (int crash = 0; crash < 3; ++crash) {
    const std::string owner = "p" + std::to_string(crash);
    auto c = claim(owner, now, 4);
    ASSERT_TRUE(ids(c).contains(crasher)) << "crash " << crash;
    ASSERT_GE(c.jobs.size(), 2u) << "it crashes beside other jobs";
    // It takes the process down with its neighbours still running.
    record_crash(owner, SIGABRT, crasher);
    now += kLease + kSec;
  }
  claim("last", now, 0);
  EXPECT_EQ(job(crasher).state, JobState::kDead);
  EXPECT_EQ(count("state = 'dead'"), 1);
  EXPECT_EQ(count("suspect = 1 AND id <> " + std::to_string(crasher)), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, CrashRecordQuarantineTest, ::testing::ValuesIn(testing::backends()),
                         testing::backend_name);

}  // namespace
}  // namespace ratchet::store
