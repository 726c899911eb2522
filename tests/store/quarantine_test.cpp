// Which job a crash is counted against: a job whose lease expired while it
// ran beside other jobs becomes a suspect; suspects run one at a time across
// the database; a job ends dead only after its process crashed
// max_lease_expiries times while it ran alone. Every time below is a value
// passed in (the store's clock is its caller's). Conformance cases: each runs
// on every backend (backends.hpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "backends.hpp"
#include "store/job_store.hpp"
#include "store/quarantine_rules.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kSec = 1'000'000;
constexpr Micros kT0 = 1'700'000'000 * kSec;
constexpr Micros kLease = 30 * kSec;

class QuarantineTest : public testing::StoreBackendTest {
 protected:
  JobId add(int attempts = 20) {
    auto r = store_->write([&](JobStore& s) {
      return s.insert({"t", "default", R"({"n":1})", 0, kT0, attempts, ""}, kT0);
    });
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? r->id : 0;
  }

  ClaimResult claim(const std::string& owner, Micros now, int limit = 10,
                    std::vector<std::pair<Micros, Micros>> outages = {}) {
    ClaimRequest req{owner, now, now + kLease, limit, {"t"}, {}, 3};
    req.outages = std::move(outages);
    auto r = store_->write([&](JobStore& s) { return s.claim(req); });
    EXPECT_TRUE(r) << r.error().to_string();
    if (!r) return {};
    for (const auto& j : r->jobs) tokens_[j.id] = j.token;
    return std::move(*r);
  }

  static std::set<JobId> ids(const ClaimResult& c) {
    std::set<JobId> out;
    for (const auto& j : c.jobs) out.insert(j.id);
    return out;
  }

  // Completes the job under the claim that holds it now (its latest).
  void complete(JobId id, const std::string& owner, Micros now) {
    ASSERT_TRUE(tokens_.contains(id)) << "job " << id << " was never claimed";
    const Fence fence{owner, tokens_[id]};
    auto w = store_->write([&](JobStore& s) { return s.complete(id, fence, "1", now).held; });
    ASSERT_TRUE(w && *w);
  }

  JobRecord job(JobId id) {
    auto r = store_->read([&](JobStore& s) { return s.get(id); });
    EXPECT_TRUE(r && r->has_value());
    return r && *r ? **r : JobRecord{};
  }

  // Jobs matching `where`, read from the quarantine's own columns.
  int count(const std::string& where) { return count_jobs(where); }

  std::map<JobId, std::int64_t> tokens_;
};

TEST_P(QuarantineTest, LeaseExpiry_BesideOtherJobs_MakesSuspectsNotDead) {
  // Eight one-step jobs running together; their process is killed three
  // times (an OOM kill, a forced redeploy): none of them is known to be the
  // cause, so none ends dead and none loses an attempt.
  std::vector<JobId> all;
  for (int i = 0; i < 8; ++i) all.push_back(add());
  Micros now = kT0;
  for (int crash = 0; crash < 3; ++crash) {
    auto c = claim("process-" + std::to_string(crash), now, 8);
    EXPECT_FALSE(c.jobs.empty());
    for (const auto& e : c.expired) EXPECT_FALSE(e.dead) << "job " << e.id;
    now += kLease + kSec;
  }
  auto c = claim("survivor", now, 8);
  for (const auto& e : c.expired) EXPECT_FALSE(e.dead) << "job " << e.id;
  EXPECT_EQ(count("state = 'dead'"), 0);
  EXPECT_EQ(count("suspect = 1"), 8);
  // A crash beside others costs no attempt; only the suspect that ran alone
  // in a crashed process (at most one per crash) is charged for it.
  for (JobId id : all) {
    const int charged = count("id = " + std::to_string(id) + " AND crashes_alone > 0");
    if (charged == 0) {
      EXPECT_LE(job(id).attempt, 2) << "job " << id << ": a crash beside others costs no attempt";
    }
  }
  // The two later crashes each charged the suspect running then, the least
  // counted first: two suspects, once each.
  EXPECT_LE(count("crashes_alone > 0"), 2);
  EXPECT_EQ(count("crashes_alone > 1"), 0) << "outside kills are spread over the suspects";
}

TEST_P(QuarantineTest, Suspects_AreClaimedOneAtATimeAcrossTheDatabase) {
  for (int i = 0; i < 3; ++i) add();
  claim("crashed", kT0, 3);
  Micros now = kT0 + kLease + kSec;
  JobId normal = add();
  auto a = claim("a", now, 10);
  ASSERT_EQ(a.expired.size(), 3u);
  ASSERT_EQ(a.jobs.size(), 2u) << "one suspect and the job never seen in a crash";
  EXPECT_TRUE(ids(a).contains(normal));
  JobId first = *ids(a).begin() == normal ? *ids(a).rbegin() : *ids(a).begin();
  EXPECT_TRUE(claim("b", now, 10).jobs.empty()) << "another process waits while a suspect runs";
  complete(first, "a", now);
  auto b = claim("b", now, 10);
  ASSERT_EQ(b.jobs.size(), 1u) << "the next suspect, once the first finished";
  EXPECT_TRUE(claim("a", now, 10).jobs.empty());
}

TEST_P(QuarantineTest, SuspectThatCrashesAloneKTimes_EndsDeadAndOthersComplete) {
  std::vector<JobId> all;
  for (int i = 0; i < 8; ++i) all.push_back(add());
  const JobId crasher = all[5];
  // Every process that runs the crasher dies; the others finish what they
  // hold unless the crasher took them down first.
  Micros now = kT0;
  int processes = 0;
  int crashes_alone = 0;
  for (; processes < 40 && count("state NOT IN ('completed', 'dead')") > 0; ++processes) {
    const std::string owner = "p" + std::to_string(processes);
    auto c = claim(owner, now, 8);
    for (const auto& e : c.expired) {
      if (e.dead) {
        EXPECT_EQ(e.id, crasher) << "only the crasher ends dead";
      }
    }
    std::set<JobId> held = ids(c);
    if (held.contains(crasher)) {
      if (held.size() == 1) ++crashes_alone;
      now += kLease + kSec;
      continue;
    }
    for (JobId id : held) complete(id, owner, now);
    now += kSec;
  }
  EXPECT_EQ(job(crasher).state, JobState::kDead);
  EXPECT_EQ(crashes_alone, 3) << "dead after exactly K crashes while it ran alone";
  for (JobId id : all) {
    if (id != crasher) {
      EXPECT_EQ(job(id).state, JobState::kCompleted) << "job " << id;
    }
  }
  std::printf("quarantine: crasher dead after %d processes, %d crashes alone\n", processes, crashes_alone);
}

TEST_P(QuarantineTest, CrashWhileSuspectRuns_IsCountedAgainstTheSuspectNotItsNeighbours) {
  JobId suspect = add();
  claim("first", kT0, 1);  // ran alone once: counted, now a suspect
  Micros now = kT0 + kLease + kSec;
  JobId a = add();
  JobId b = add();
  auto c = claim("second", now, 10);
  ASSERT_EQ(ids(c), (std::set<JobId>{suspect, a, b}));
  now += kLease + kSec;
  auto d = claim("third", now, 10);
  EXPECT_EQ(d.expired.size(), 3u);
  EXPECT_EQ(count("suspect = 1"), 1) << "the neighbours stay clean";
  EXPECT_EQ(job(suspect).attempt, 3) << "each crash it was alone in used up an attempt";
  EXPECT_EQ(job(a).attempt, 1) << "its attempt is not used up";
  EXPECT_EQ(job(suspect).state, JobState::kRunning) << "the only suspect runs again first";
}

TEST_P(QuarantineTest, OutsideKillsWhileSuspectsRun_AreSpreadOverThemSoNoneEndsDead) {
  // Three suspects (their process was killed while they ran together), then
  // six more outside kills, each while a suspect runs alone: the kills are
  // charged round the suspects, so none reaches three.
  for (int i = 0; i < 3; ++i) add();
  claim("first", kT0, 3);
  Micros now = kT0 + kLease + kSec;
  for (int kill = 0; kill < 6; ++kill) {
    auto c = claim("p" + std::to_string(kill), now, 10);
    for (const auto& e : c.expired) EXPECT_FALSE(e.dead) << "kill " << kill << ": job " << e.id;
    EXPECT_EQ(c.jobs.size(), 1u) << "one suspect at a time";
    now += kLease + kSec;
  }
  claim("last", now, 0);
  EXPECT_EQ(count("state = 'dead'"), 0);
  EXPECT_EQ(count("crashes_alone = 2"), 3);
}

TEST_P(QuarantineTest, RetryByHand_ClearsSuspicion) {
  JobId id = add(20);
  Micros now = kT0;
  for (int i = 0; i < 3; ++i) {
    claim("p" + std::to_string(i), now, 1);
    now += kLease + kSec;
  }
  claim("last", now, 1);
  ASSERT_EQ(job(id).state, JobState::kDead);
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.retry(id, now, 0); }));
  EXPECT_EQ(count("suspect = 1"), 0);
  EXPECT_EQ(count("crashes_alone > 0"), 0);
}

// A server that restarts or fails over, a lock held past the lease, a full
// disk: the process lives on, but cannot renew its leases. Its claim, once
// the database answers again, passes the span in which its own writes
// failed; a lease that ran out in it is no crash. Before, a job running
// alone was charged each time and ended dead after three such outages, and
// jobs running together became suspects, run one at a time.
TEST_P(QuarantineTest, LeasesThatRanOutWhileTheDatabaseWasOutOfReach_AreNoCrash) {
  const JobId alone = add();
  Micros now = kT0;
  for (int outage = 0; outage < 5; ++outage) {
    auto c = claim("process", now, 1);
    ASSERT_EQ(ids(c), std::set<JobId>{alone}) << "outage " << outage;
    // The writes failed from a heartbeat after the claim until the database
    // answered, two seconds after the lease ran out.
    const Micros failing_from = now + 10 * kSec;
    now += kLease + 2 * kSec;
    auto after = claim("process", now, 0, {{failing_from, now}});
    ASSERT_EQ(after.expired.size(), 1u) << "outage " << outage;
    EXPECT_FALSE(after.expired[0].dead) << "outage " << outage;
    EXPECT_NE(after.expired[0].error.find("could not renew it while the database was out of reach"),
              std::string::npos)
        << after.expired[0].error;
  }
  EXPECT_EQ(job(alone).attempt, 1) << "no outage used up an attempt";
  EXPECT_EQ(count("crashes_alone > 0"), 0);
  EXPECT_EQ(count("suspect = 1"), 0);

  // Eight jobs together: none becomes a suspect, and all run at once again.
  for (int i = 0; i < 7; ++i) add();
  EXPECT_EQ(claim("process", now, 8).jobs.size(), 8u);
  const Micros failing_from = now + 10 * kSec;
  now += kLease + 2 * kSec;
  auto after = claim("process", now, 8, {{failing_from, now}});
  EXPECT_EQ(after.expired.size(), 8u);
  EXPECT_EQ(after.jobs.size(), 8u) << "no suspect to run alone";
  EXPECT_EQ(count("suspect = 1"), 0);
}

// A job that itself cuts its process off from the database (using up its
// descriptors, say) would run, expire in the outage it caused and be
// forgiven for ever: only kForgivenExpiries of a job's expiries pass for
// outages, then they are judged as crashes again.
TEST_P(QuarantineTest, LeasesRunningOutInOutagesAgainAndAgain_AreForgivenOnlySoOften) {
  const JobId id = add(100);
  Micros now = kT0;
  int forgiven = 0;
  for (int outage = 0; outage < kForgivenExpiries + 3 && job(id).state != JobState::kDead; ++outage) {
    auto c = claim("process", now, 1);
    ASSERT_EQ(ids(c), std::set<JobId>{id}) << "outage " << outage;
    const Micros failing_from = now + 10 * kSec;
    now += kLease + 2 * kSec;
    auto after = claim("process", now, 0, {{failing_from, now}});
    ASSERT_EQ(after.expired.size(), 1u);
    if (after.expired[0].error.find("out of reach") != std::string::npos) ++forgiven;
  }
  EXPECT_EQ(forgiven, kForgivenExpiries);
  EXPECT_EQ(job(id).state, JobState::kDead) << "then three expiries alone end it";
}

// The outage must cover the moment the lease ran out: a lease that ran out
// after the database answered again (its owner could have renewed it), or
// before its writes began to fail, is judged as a crash, as before.
TEST_P(QuarantineTest, LeaseThatRanOutAfterTheOutage_IsJudgedAsBefore) {
  const JobId id = add();
  claim("first", kT0, 1);
  const Micros now = kT0 + kLease + 2 * kSec;
  auto c = claim("claimer", now, 0, {{kT0 + 5 * kSec, kT0 + kLease - kSec}});
  ASSERT_EQ(c.expired.size(), 1u);
  EXPECT_EQ(count("id = " + std::to_string(id) + " AND crashes_alone = 1"), 1) << c.expired[0].error;
  EXPECT_NE(c.expired[0].error.find("crashed or hung"), std::string::npos) << c.expired[0].error;
}

TEST_P(QuarantineTest, LeaseThatRanOutBeforeTheOutage_IsJudgedAsBefore) {
  const JobId id = add();
  claim("first", kT0, 1);
  const Micros now = kT0 + kLease + 3 * kSec;
  auto c = claim("claimer", now, 0, {{kT0 + kLease + kSec, now}});
  ASSERT_EQ(c.expired.size(), 1u);
  EXPECT_EQ(count("id = " + std::to_string(id) + " AND crashes_alone = 1"), 1) << c.expired[0].error;
}

INSTANTIATE_TEST_SUITE_P(Backends, QuarantineTest, ::testing::ValuesIn(testing::backends()),
                         testing::backend_name);

}  // namespace
}  // namespace ratchet::store
