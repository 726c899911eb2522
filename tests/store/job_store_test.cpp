#include "store/job_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "backends.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kSec = 1'000'000;
constexpr Micros kT0 = 1'700'000'000 * kSec;

// Conformance cases: each runs on every backend (backends.hpp).
class JobStoreTest : public testing::StoreBackendTest {
 protected:
  JobId add(const std::string& type = "t", Micros run_at = kT0, int priority = 0, int attempts = 3,
            const std::string& key = "") {
    auto r = store_->write([&](JobStore& s) {
      return s.insert({type, "default", R"({"n":1})", priority, run_at, attempts, key}, kT0);
    });
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? r->id : 0;
  }

  ClaimResult claim(const std::string& owner, Micros now, int limit = 10,
                    std::vector<std::string> types = {"t"}) {
    ClaimRequest req{owner, now, now + 30 * kSec, limit, std::move(types), {}, 3};
    auto r = store_->write([&](JobStore& s) { return s.claim(req); });
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? std::move(*r) : ClaimResult{};
  }

  JobRecord job(JobId id) {
    auto r = store_->read([&](JobStore& s) { return s.get(id); });
    EXPECT_TRUE(r && r->has_value()) << (r ? "no such job" : r.error().to_string());
    return r && *r ? **r : JobRecord{};
  }
};

TEST_P(JobStoreTest, Insert_DueNow_IsAvailableAndFutureIsScheduled) {
  JobId now = add("t", kT0);
  JobId later = add("t", kT0 + 60 * kSec);
  EXPECT_EQ(job(now).state, JobState::kAvailable);
  EXPECT_EQ(job(later).state, JobState::kScheduled);
  EXPECT_EQ(job(now).args["n"], 1);
}

TEST_P(JobStoreTest, Insert_LiveUniqueKey_ReturnsExistingJob) {
  JobId a = add("t", kT0, 0, 3, "movie-1");
  auto r = store_->write([&](JobStore& s) {
    return s.insert({"t", "default", "{}", 0, kT0, 3, "movie-1"}, kT0);
  });
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->existing);
  EXPECT_EQ(r->id, a);
}

TEST_P(JobStoreTest, Insert_UniqueKeyOfFinishedJob_CreatesNewJob) {
  JobId a = add("t", kT0, 0, 3, "k");
  auto c = claim("w", kT0);
  ASSERT_EQ(c.jobs.size(), 1u);
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.complete(a, {"w", 1}, "null", kT0).held; }).value());
  JobId b = add("t", kT0, 0, 3, "k");
  EXPECT_NE(a, b);
}

TEST_P(JobStoreTest, Claim_OrdersByPriorityThenRunAt) {
  JobId late = add("t", kT0 - 1 * kSec, 5);
  JobId urgent = add("t", kT0, 0);
  JobId early = add("t", kT0 - 2 * kSec, 5);
  add("t", kT0 + 10 * kSec, 0);  // not due
  auto c = claim("w", kT0);
  ASSERT_EQ(c.jobs.size(), 3u);
  EXPECT_EQ(c.jobs[0].id, urgent);
  EXPECT_EQ(c.jobs[1].id, early);
  EXPECT_EQ(c.jobs[2].id, late);
  EXPECT_EQ(c.jobs[0].attempt, 1);
  auto j = job(urgent);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.lease_owner, "w");
}

TEST_P(JobStoreTest, Claim_DueResumedJobGoesBeforeFreshOnesQueuedEarlier) {
  JobId parked = add("t", kT0 - 10 * kSec);
  claim("w", kT0 - 10 * kSec, 1);
  ASSERT_TRUE(
      store_->write([&](JobStore& s) {
              return s.park(parked, {"w", 1}, kT0, "limiter imdb", kT0 - kSec);
            })
          .value()
          .held);
  JobId fresh = add("t", kT0 - 5 * kSec);  // due before the parked one
  auto c = claim("w", kT0, 2);
  ASSERT_EQ(c.jobs.size(), 2u);
  EXPECT_EQ(c.jobs[0].id, parked);  // it may hold a reserved limiter slot
  EXPECT_TRUE(c.jobs[0].resumed);
  EXPECT_EQ(c.jobs[1].id, fresh);
  EXPECT_FALSE(c.jobs[1].resumed);
}

TEST_P(JobStoreTest, Claim_SaysWhenTheNextPendingJobFallsDue) {
  add("t", kT0 + 7 * kSec, 5);
  add("other", kT0 + 3 * kSec, 0);  // another type's job wakes the dispatcher too
  add("t", kT0 + 9 * kSec, 0);
  auto c = claim("w", kT0);
  EXPECT_TRUE(c.jobs.empty());
  ASSERT_TRUE(c.next_run_at);
  EXPECT_EQ(*c.next_run_at, kT0 + 3 * kSec);
  auto none = claim("w", kT0 + 10 * kSec, 10, {"t", "other"});
  EXPECT_EQ(none.jobs.size(), 3u);
  EXPECT_FALSE(none.next_run_at);
}

TEST_P(JobStoreTest, Claim_TakingItsLimit_SaysWhetherMoreOfItsJobsAreDue) {
  add("t", kT0, 1);
  add("t", kT0, 0);
  add("t", kT0 + 9 * kSec, 0);  // not due yet
  add("other", kT0, 0);         // not of the types asked for
  auto first = claim("w", kT0, 1);
  ASSERT_EQ(first.jobs.size(), 1u);
  EXPECT_TRUE(first.more_due) << "a second job of type t was due";
  auto last = claim("w", kT0, 1);
  ASSERT_EQ(last.jobs.size(), 1u);
  EXPECT_FALSE(last.more_due) << "the only jobs left are not due, or of another type";
  auto none = claim("w", kT0, 1);
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_FALSE(none.more_due);
}

TEST_P(JobStoreTest, Claim_ManyJobsAheadInSeveralPriorities_ClaimsTheDueOneAndNamesTheNext) {
  ASSERT_TRUE(store_->write([&](JobStore& s) {
    for (int i = 0; i < 20000; ++i) s.insert({"t", "default", "{}", i % 3, kT0 + (i + 1) * kSec, 3, ""}, kT0);
  }));
  JobId due = add("t", kT0, 1);
  auto c = claim("w", kT0);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].id, due);
  EXPECT_EQ(c.next_run_at, kT0 + kSec);
}

TEST_P(JobStoreTest, Claim_OnlyKnownTypesAndNeverTwice) {
  add("t");
  add("other");
  auto a = claim("a", kT0);
  auto b = claim("b", kT0);
  EXPECT_EQ(a.jobs.size(), 1u);
  EXPECT_TRUE(b.jobs.empty());
}

TEST_P(JobStoreTest, Checkpoint_CommittedStepIsReturnedOnNextClaimAndNeverOverwritten) {
  JobId id = add();
  claim("w", kT0);
  auto w = store_->write([&](JobStore& s) {
    return s.checkpoint({id, {"w", 1}, "fetch", R"({"v":1})", kT0, kT0 + 1}, kT0 + 30 * kSec, kT0 + 1);
  });
  ASSERT_TRUE(w && w->held);
  // Same step again (a bug or a race): the first output stands.
  ASSERT_TRUE(store_->write([&](JobStore& s) {
    return s.checkpoint({id, {"w", 1}, "fetch", R"({"v":2})", kT0, kT0 + 1}, kT0 + 30 * kSec, kT0 + 1);
  }));
  ASSERT_TRUE(store_->write([&](JobStore& s) {
                      return s.release(id, {"w", 1}, "stopping", kT0 + 2).held;
                    })
                  .value());
  auto c = claim("w2", kT0 + 3);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].checkpoints.at("fetch")["v"], 1);
  EXPECT_EQ(c.jobs[0].attempt, 1) << "a release does not use up an attempt";
}

TEST_P(JobStoreTest, Writes_WithoutTheLease_AreRefusedAndChangeNothing) {
  JobId id = add();
  claim("owner", kT0);
  auto w = store_->write([&](JobStore& s) {
    return s.checkpoint({id, {"intruder", 1}, "fetch", "1", kT0, kT0}, kT0 + kSec, kT0);
  });
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->held);
  EXPECT_FALSE(store_->write([&](JobStore& s) {
                       return s.complete(id, {"intruder", 1}, "1", kT0).held;
                     })
                   .value());
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_TRUE(j.steps.empty());
}

TEST_P(JobStoreTest, Writes_OfAClaimWhoseLeaseExpired_RefusedOnceTheSameOwnerClaimedTheJobAgain) {
  JobId id = add();
  auto first = claim("w", kT0);
  ASSERT_EQ(first.jobs.size(), 1u);
  const Fence old{"w", first.jobs[0].token};
  // The same owner name claims the job again after the first lease expired
  // (its engine was paused past the lease, or its clock jumped).
  auto second = claim("w", kT0 + 31 * kSec);
  ASSERT_EQ(second.expired.size(), 1u);
  ASSERT_EQ(second.jobs.size(), 1u);
  const Fence current{"w", second.jobs[0].token};
  EXPECT_GT(current.token, old.token) << "a claim token only grows";

  // The first run wakes up: each of its writes is refused, whatever time its
  // clock says (here one still inside its own lease).
  for (Micros now : {kT0 + 10 * kSec, kT0 + 32 * kSec}) {
    auto w = store_->write([&](JobStore& s) {
      std::vector<bool> held;
      held.push_back(s.checkpoint({id, old, "fetch", "1", kT0, now}, now + 30 * kSec, now).held);
      held.push_back(!s.renew("w", {{id, old.token}}, now + 30 * kSec, now).empty());
      held.push_back(s.park(id, old, now + kSec, "limiter imdb", now).held);
      held.push_back(s.fail_attempt({id, old, "fetch", "boom", now, now + kSec}).held);
      held.push_back(s.release(id, old, "stopping", now).held);
      held.push_back(s.finish_cancelled(id, old, now).held);
      held.push_back(s.complete(id, old, "1", now).held);
      return held;
    });
    ASSERT_TRUE(w);
    EXPECT_EQ(*w, std::vector<bool>(7, false)) << "checkpoint, renew, park, fail, release, cancel, complete";
  }
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.lease_owner, "w");
  EXPECT_EQ(to_micros(*j.lease_expires_at), kT0 + 61 * kSec) << "the renewal was refused too";
  EXPECT_TRUE(j.steps.empty());

  // The run that took the job over is the one that commits.
  auto w = store_->write([&](JobStore& s) {
    const Micros now = kT0 + 33 * kSec;
    return s.checkpoint({id, current, "fetch", "2", now, now}, now + 30 * kSec, now).held &&
           s.complete(id, current, "2", now).held;
  });
  ASSERT_TRUE(w);
  EXPECT_TRUE(*w);
  j = job(id);
  EXPECT_EQ(j.state, JobState::kCompleted);
  ASSERT_EQ(j.steps.size(), 1u);
  EXPECT_EQ(j.steps[0].output, 2);
}

TEST_P(JobStoreTest, Writes_AfterTheLeaseExpired_RefusedEvenBeforeAnotherClaim) {
  JobId id = add();
  auto c = claim("w", kT0);
  ASSERT_EQ(c.jobs.size(), 1u);
  const Fence fence{"w", c.jobs[0].token};
  const Micros late = kT0 + 30 * kSec;  // the lease ends here
  auto w = store_->write([&](JobStore& s) {
    return s.checkpoint({id, fence, "fetch", "1", kT0, late}, late + 30 * kSec, late).held ||
           !s.renew("w", {{id, fence.token}}, late + 30 * kSec, late).empty() ||
           s.complete(id, fence, "1", late).held;
  });
  ASSERT_TRUE(w);
  EXPECT_FALSE(*w);
  EXPECT_TRUE(job(id).steps.empty());
  EXPECT_EQ(job(id).state, JobState::kRunning);
}

TEST_P(JobStoreTest, Park_SchedulesAtUntilKeepsAttemptAndRecordsTimeline) {
  JobId id = add();
  claim("w", kT0);
  ASSERT_TRUE(
      store_->write([&](JobStore& s) {
              return s.park(id, {"w", 1}, kT0 + 5 * kSec, "limiter imdb", kT0);
            })
          .value()
          .held);
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kScheduled);
  EXPECT_EQ(to_micros(j.run_at), kT0 + 5 * kSec);
  ASSERT_EQ(j.timeline.size(), 1u);
  EXPECT_EQ(j.timeline[0].kind, "parked");
  EXPECT_TRUE(claim("w", kT0 + kSec).jobs.empty());
  auto c = claim("w", kT0 + 5 * kSec);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].attempt, 1);
}

// The process that parked a job holds the limiter slot it waits for: it
// takes the job back when it falls due, and another process only once it
// has been due a second (its parker stopped or gone), each told when.
TEST_P(JobStoreTest, Claim_AJobParkedByAnotherProcessGoesToItFirstAndToOthersASecondLater) {
  JobId parked = add();
  claim("a", kT0);
  ASSERT_TRUE(
      store_->write([&](JobStore& s) {
              return s.park(parked, {"a", 1}, kT0 + 5 * kSec, "limiter", kT0);
            })
          .value()
          .held);
  JobId fresh = add("t", kT0 + 7 * kSec);
  auto b_early = claim("b", kT0 + kSec);
  EXPECT_TRUE(b_early.jobs.empty());
  ASSERT_TRUE(b_early.next_run_at);
  EXPECT_EQ(*b_early.next_run_at, kT0 + 6 * kSec) << "to b, the parked job falls due a second after its time";
  auto a_early = claim("a", kT0 + kSec);
  ASSERT_TRUE(a_early.next_run_at);
  EXPECT_EQ(*a_early.next_run_at, kT0 + 5 * kSec) << "to a, at its time";
  EXPECT_TRUE(claim("b", kT0 + 5 * kSec + kSec / 2).jobs.empty()) << "due half a second: still a's";
  auto b_late = claim("b", kT0 + 6 * kSec);
  ASSERT_EQ(b_late.jobs.size(), 1u) << "due a second: a is stopped or gone, b takes it";
  EXPECT_EQ(b_late.jobs[0].id, parked);
  EXPECT_TRUE(b_late.jobs[0].resumed);
  // Claimed, it is nobody's parked job any more: a fresh job, or one parked
  // again, goes to whoever asks at its time.
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.park(parked, {"b", 2}, kT0 + 7 * kSec, "limiter", kT0 + 6 * kSec);
                  })
                  .value()
                  .held);
  auto a_at_seven = claim("a", kT0 + 7 * kSec);
  ASSERT_EQ(a_at_seven.jobs.size(), 1u);
  EXPECT_EQ(a_at_seven.jobs[0].id, fresh);
  auto b_at_seven = claim("b", kT0 + 7 * kSec);
  ASSERT_EQ(b_at_seven.jobs.size(), 1u);
  EXPECT_EQ(b_at_seven.jobs[0].id, parked);
}

// A process that stops hands the jobs it parked to the others: they fall
// due for any process at their time.
TEST_P(JobStoreTest, DisownParked_TheJobsAStoppingProcessParkedFallDueForAnyAtTheirTime) {
  JobId mine = add();
  JobId theirs = add();
  claim("a", kT0, 1);
  claim("c", kT0, 1);
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.park(mine, {"a", 1}, kT0 + 5 * kSec, "limiter", kT0).held &&
                           s.park(theirs, {"c", 1}, kT0 + 5 * kSec, "limiter", kT0).held;
                  })
                  .value());
  auto disowned = store_->write([&](JobStore& s) { return s.disown_parked("a"); });
  ASSERT_TRUE(disowned);
  EXPECT_EQ(*disowned, 1);
  auto b = claim("b", kT0 + 5 * kSec);
  ASSERT_EQ(b.jobs.size(), 1u) << "a's parked job, at its time; c's is still c's";
  EXPECT_EQ(b.jobs[0].id, mine);
  ASSERT_TRUE(b.next_run_at);
  EXPECT_EQ(*b.next_run_at, kT0 + 6 * kSec);
}

// A step parked for its turn is parked a few seconds at a time and moved on
// while its process lives: a move goes only later, only for the attempt
// that parked, and never undoes a resume to a sooner time.
TEST_P(JobStoreTest, ExtendParked_MovesTheParkedAttemptLaterOnly) {
  JobId a = add();
  JobId b = add();
  JobId running = add();
  claim("w", kT0, 3);
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.park(a, {"w", 1}, kT0 + 3 * kSec, "turn", kT0).held &&
                           s.park(b, {"w", 1}, kT0 + 3 * kSec, "turn", kT0).held;
                  })
                  .value());
  auto moved = store_->write([&](JobStore& s) {
    return s.extend_parked({{a, 1}, {b, 2}, {running, 1}}, kT0 + 4 * kSec, kT0 + kSec);
  });
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, 1) << "only a, parked by attempt 1";
  EXPECT_EQ(to_micros(job(a).run_at), kT0 + 4 * kSec);
  EXPECT_EQ(to_micros(job(b).run_at), kT0 + 3 * kSec) << "b was not parked by attempt 2";
  EXPECT_EQ(job(running).state, JobState::kRunning);
  // Resumed to a sooner time, then a move queued before it knew: not undone.
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.resume_parked(a, 1, kT0 + 2 * kSec); }).value());
  EXPECT_EQ(to_micros(job(a).run_at), kT0 + 2 * kSec);
  auto again = store_->write([&](JobStore& s) { return s.extend_parked({{a, 1}}, kT0 + kSec, kT0 + kSec); });
  EXPECT_EQ(*again, 0) << "a move never brings a job sooner";
}

TEST_P(JobStoreTest, FailAttempt_WithRetry_IsRetryableThenNextAttempt) {
  JobId id = add();
  claim("w", kT0);
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.fail_attempt({id, {"w", 1}, "fetch", "boom", kT0, kT0 + 10 * kSec}).held;
                  })
                  .value());
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kRetryable);
  ASSERT_EQ(j.errors.size(), 1u);
  EXPECT_EQ(j.errors[0].step, "fetch");
  EXPECT_EQ(j.errors[0].error, "boom");
  EXPECT_EQ(j.errors[0].attempt, 1);
  ASSERT_EQ(j.steps.size(), 1u);
  EXPECT_EQ(j.steps[0].state, "failed");
  // Read by people (`ratchet jobs show`, the dashboard): a span, not a
  // count of microseconds since 1970.
  ASSERT_FALSE(j.timeline.empty());
  EXPECT_EQ(j.timeline.back().kind, "retry_scheduled");
  EXPECT_EQ(j.timeline.back().detail, "attempt 1 failed; next attempt in 10s");
  auto c = claim("w", kT0 + 10 * kSec);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].attempt, 2);
}

TEST_P(JobStoreTest, FailAttempt_WithoutRetry_IsDeadAndRetryByHandRevivesIt) {
  JobId id = add();
  claim("w", kT0);
  ASSERT_TRUE(
      store_->write([&](JobStore& s) {
              return s.fail_attempt({id, {"w", 1}, "", "fatal", kT0, {}}).held;
            })
          .value());
  EXPECT_EQ(job(id).state, JobState::kDead);
  EXPECT_TRUE(job(id).finished_at.has_value());
  auto st = store_->write([&](JobStore& s) { return s.retry(id, kT0 + 1, 1); });
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, JobState::kDead) << "the state it was retried from";
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kAvailable);
  EXPECT_EQ(j.attempt, 0);
  EXPECT_FALSE(j.finished_at.has_value());
  // Retried again while available: left as it is, and it says so.
  auto again = store_->write([&](JobStore& s) { return s.retry(id, kT0 + 2, 1); });
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, JobState::kAvailable);
}

TEST_P(JobStoreTest, Cancel_PendingJob_IsCancelledAtOnce) {
  JobId id = add();
  auto st = store_->write([&](JobStore& s) { return s.cancel(id, kT0); });
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, JobState::kCancelled);
  EXPECT_TRUE(claim("w", kT0).jobs.empty());
}

TEST_P(JobStoreTest, Cancel_RunningJob_SetsFlagSeenByNextCheckpoint) {
  JobId id = add();
  claim("w", kT0);
  ASSERT_EQ(*store_->write([&](JobStore& s) { return s.cancel(id, kT0); }), JobState::kRunning);
  auto w = store_->write([&](JobStore& s) {
    return s.checkpoint({id, {"w", 1}, "a", "1", kT0, kT0}, kT0 + kSec, kT0);
  });
  ASSERT_TRUE(w && w->held);
  EXPECT_TRUE(w->cancel_requested);
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.finish_cancelled(id, {"w", 1}, kT0).held; }).value());
  EXPECT_EQ(job(id).state, JobState::kCancelled);
}

TEST_P(JobStoreTest, Cancel_FinishedJob_LeavesItAlone) {
  JobId id = add();
  claim("w", kT0);
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.complete(id, {"w", 1}, "1", kT0).held; }).value());
  EXPECT_EQ(*store_->write([&](JobStore& s) { return s.cancel(id, kT0); }), JobState::kCompleted);
  EXPECT_EQ(job(id).state, JobState::kCompleted);
}

TEST_P(JobStoreTest, Claim_ExpiredLease_TakenOverWithCheckpointsAndCountsAsFailure) {
  JobId id = add();
  claim("dead-worker", kT0);
  ASSERT_TRUE(store_->write([&](JobStore& s) {
    return s.checkpoint({id, {"dead-worker", 1}, "a", "7", kT0, kT0}, kT0 + 30 * kSec, kT0);
  }));
  EXPECT_TRUE(claim("b", kT0 + 29 * kSec).jobs.empty()) << "the lease still holds";
  auto c = claim("b", kT0 + 31 * kSec);
  ASSERT_EQ(c.expired.size(), 1u);
  EXPECT_FALSE(c.expired[0].dead);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].checkpoints.at("a"), 7);
  EXPECT_EQ(c.jobs[0].attempt, 2);
  auto j = job(id);
  EXPECT_EQ(j.lease_owner, "b");
  EXPECT_EQ(j.lease_expiries, 1);
  ASSERT_FALSE(j.timeline.empty());
  EXPECT_EQ(j.timeline[0].kind, "lease_expired");
}

TEST_P(JobStoreTest, Claim_RepeatedLeaseExpiry_EndsDead) {
  JobId id = add("t", kT0, 0, 20);
  Micros now = kT0;
  for (int i = 0; i < 3; ++i) {
    claim("crasher", now);
    now += 31 * kSec;
  }
  claim("b", now);
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kDead);
  EXPECT_EQ(j.lease_expiries, 3);
}

TEST_P(JobStoreTest, Renew_ExtendsHeldLeasesAndReportsLostOnes) {
  JobId a = add();
  JobId b = add();
  claim("w", kT0);
  auto held = store_->write([&](JobStore& s) {
    return s.renew("w", {{a, 1}, {b, 1}, {999, 1}}, kT0 + 60 * kSec, kT0);
  });
  ASSERT_TRUE(held);
  EXPECT_EQ(held->size(), 2u);
  EXPECT_EQ(to_micros(*job(a).lease_expires_at), kT0 + 60 * kSec);
}

TEST_P(JobStoreTest, Purge_RemovesOnlyOldTerminalJobsWithTheirRows) {
  JobId old_done = add();
  JobId pending = add("t", kT0 + 100 * kSec);
  claim("w", kT0);
  ASSERT_TRUE(store_->write([&](JobStore& s) {
    return s.checkpoint({old_done, {"w", 1}, "a", "1", kT0, kT0}, kT0 + kSec, kT0);
  }));
  ASSERT_TRUE(store_->write([&](JobStore& s) { return s.complete(old_done, {"w", 1}, "1", kT0); }));
  auto n = store_->write([&](JobStore& s) { return s.purge(kT0 + 1, 100); });
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1);
  auto gone = store_->read([&](JobStore& s) { return s.get(old_done); });
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->has_value());
  EXPECT_EQ(job(pending).state, JobState::kScheduled);
}

TEST_P(JobStoreTest, Purge_InChunks_DeletesAtMostTheLimitOldestFirst) {
  std::vector<JobId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(add());
  auto c = claim("w", kT0);
  ASSERT_EQ(c.jobs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_->write([&](JobStore& s) {
                        return s.complete(ids[i], {"w", 1}, "1", kT0 + i).held;
                      })
                    .value());
  }
  auto chunk = [&] { return store_->write([&](JobStore& s) { return s.purge(kT0 + kSec, 2); }).value(); };
  EXPECT_EQ(chunk(), 2);
  EXPECT_FALSE(store_->read([&](JobStore& s) { return s.get(ids[1]); }).value().has_value());
  EXPECT_EQ(job(ids[2]).state, JobState::kCompleted) << "the oldest go first";
  EXPECT_EQ(chunk(), 2);
  EXPECT_EQ(chunk(), 1);
  EXPECT_EQ(chunk(), 0);
  // An id names one job for good: one handed out after a purge emptied
  // the table was 1 again on SQLite, and `jobs show 1` (or a host that kept
  // the id) found another job.
  const JobId next = add();
  EXPECT_GT(next, ids.back()) << "ids are never reused";
}

TEST_P(JobStoreTest, Write_ManyThreadsAtOnce_ShareCommitsAndLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::jthread> threads;
  std::atomic<int> ok{0};
  std::uint64_t before = store_->commits();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        if (store_->write([&](JobStore& s) { return s.insert({"t", "q", "{}", 0, kT0, 1, ""}, kT0).id; }))
          ++ok;
      }
    });
  }
  threads.clear();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  auto counts = store_->read([](JobStore& s) { return s.counts(); });
  ASSERT_TRUE(counts);
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ(counts->at(0).second, kThreads * kPerThread);
  EXPECT_LE(store_->commits() - before, static_cast<std::uint64_t>(kThreads * kPerThread));
}

TEST_P(JobStoreTest, Write_OneFailingWrite_RollsBackItselfOnlyNotOthersInTheBatch) {
  auto bad = store_->write([](JobStore& s) -> int {
    s.insert({"t", "default", R"({"n":2})", 0, kT0, 1, ""}, kT0);
    throw std::runtime_error("simulated failure");
  });
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("simulated failure"), std::string::npos) << bad.error().to_string();
  JobId id = add();
  EXPECT_EQ(job(id).state, JobState::kAvailable);
  auto all = store_->read([](JobStore& s) { return s.list({}); });
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 1u) << "the failed write's insert was rolled back";
}

// Writes queued together share one transaction; a failing one among them
// (which a server backend first runs without a savepoint of its own) costs
// the others nothing: each reports its own outcome, and only its effects are
// gone.
TEST_P(JobStoreTest, Write_OneFailingWriteAmongOthersInOneBatch_OnlyItsEffectsAreRolledBack) {
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::optional<Error>> outcome(5);
  std::atomic<bool> hold = true;
  // The first write keeps the writer busy until the rest are queued, so they
  // make one batch.
  store_->write_async(
      [&](JobStore&) {
        while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [&](std::optional<Error>) {});
  for (int i = 0; i < 5; ++i) {
    store_->write_async(
        [i](JobStore& s) {
          s.insert({"t", "default", "{\"n\":" + std::to_string(i) + "}", 0, kT0, 1, ""}, kT0);
          if (i == 2) throw std::runtime_error("simulated failure of write 2");
        },
        [&, i](std::optional<Error> e) {
          std::lock_guard lock(mu);
          outcome[static_cast<std::size_t>(i)] = std::move(e);
          ++finished;
          cv.notify_all();
        });
  }
  hold = false;
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return finished == 5; }));
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(outcome[static_cast<std::size_t>(i)].has_value(), i == 2)
        << "write " << i << ": "
        << (outcome[static_cast<std::size_t>(i)] ? outcome[static_cast<std::size_t>(i)]->to_string() : "ok");
  }
  auto all = store_->read([](JobStore& s) { return s.list({}); });
  ASSERT_TRUE(all);
  std::set<std::string> args;
  for (const auto& j : *all) args.insert(j.args.dump());
  EXPECT_EQ(args, (std::set<std::string>{R"({"n":0})", R"({"n":1})", R"({"n":3})", R"({"n":4})"}));
}

TEST_P(JobStoreTest, List_ByIdTextAndBefore_NewestFirst) {
  std::vector<JobId> ids;
  for (const std::string name : {"Heat", "Alien", "heated", "Up"}) {
    auto r = store_->write([&](JobStore& s) {
      return s.insert({"t", "default", R"({"name":")" + name + R"("})", 0, kT0, 3, ""}, kT0);
    });
    ASSERT_TRUE(r);
    ids.push_back(r->id);
  }
  auto by_text = [](std::string text) {
    JobFilter f;
    f.text = std::move(text);
    return f;
  };
  auto by_id = [](JobId id) {
    JobFilter f;
    f.id = id;
    return f;
  };
  auto before = [](JobId id) {
    JobFilter f;
    f.before_id = id;
    return f;
  };
  auto newest = [](JobFilter f) {
    f.newest_first = true;
    return f;
  };
  auto first = [](JobFilter f) {
    f.limit = 1;
    return f;
  };
  auto list = [&](JobFilter f) {
    std::vector<JobId> out;
    auto r = store_->read([&](JobStore& s) { return s.list(f); });
    EXPECT_TRUE(r) << r.error().to_string();
    if (r) {
      for (const auto& j : *r) out.push_back(j.id);
    }
    return out;
  };
  EXPECT_EQ(list(by_text("HEAT")), (std::vector<JobId>{ids[0], ids[2]})) << "case-insensitive, in arguments";
  EXPECT_EQ(list(newest(by_text("heat"))), (std::vector<JobId>{ids[2], ids[0]}));
  EXPECT_EQ(list(by_text("%")), std::vector<JobId>{}) << "a plain substring, not a LIKE pattern";
  EXPECT_EQ(list(by_id(ids[1])), std::vector<JobId>{ids[1]});
  EXPECT_EQ(list(first(newest(before(ids[2])))), std::vector<JobId>{ids[1]});
  claim("w", kT0, 1);
  ASSERT_TRUE(
      store_
          ->write([&](JobStore& s) {
            return s.fail_attempt({ids[0], {"w", 1}, "fetch", "HTTP 503 from the portal", kT0, {}}).held;
          })
          .value());
  EXPECT_EQ(list(by_text("http 503")), std::vector<JobId>{ids[0]}) << "in the last error too";
}

TEST_P(JobStoreTest, Activity_CountsCompletedFailedAndDeadPerMinute) {
  const Micros minute = 60 * kSec;
  const Micros m0 = (kT0 / minute) * minute;
  // The claim's lease lasts 30 s: it spans the end of the minute m0.
  const Micros t = m0 + minute - 5 * kSec;
  ASSERT_GT(t, kT0);
  JobId a = add(), b = add(), c = add();
  ASSERT_EQ(claim("w", t, 3).jobs.size(), 3u);
  ASSERT_TRUE(store_->write([&](JobStore& s) {
                      return s.complete(a, {"w", 1}, "null", t + kSec).held;
                    })
                  .value());
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.fail_attempt({b, {"w", 1}, "", "boom", t + 2 * kSec, t + 90 * kSec}).held;
                  })
                  .value());
  ASSERT_TRUE(store_
                  ->write([&](JobStore& s) {
                    return s.fail_attempt({c, {"w", 1}, "", "fatal", t + 6 * kSec, {}}).held;
                  })
                  .value());
  auto r = store_->read([&](JobStore& s) { return s.activity(m0 - minute); });
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].minute, from_micros(m0));
  EXPECT_EQ((*r)[0].completed, 1);
  EXPECT_EQ((*r)[0].failed, 1);
  EXPECT_EQ((*r)[0].dead, 0);
  EXPECT_EQ((*r)[1].minute, from_micros(m0 + minute));
  EXPECT_EQ((*r)[1].failed, 1);
  EXPECT_EQ((*r)[1].dead, 1);
  auto later = store_->read([&](JobStore& s) { return s.activity(m0 + 2 * minute); });
  ASSERT_TRUE(later);
  EXPECT_TRUE(later->empty());
}

TEST_P(JobStoreTest, Reports_OneRowPerWorker_ForgottenWhenStale) {
  auto put = [&](const std::string& worker, Micros at, const std::string& text) {
    ASSERT_TRUE(store_->write([&](JobStore& s) { s.put_report(worker, at, text, at - 100 * kSec); }));
  };
  put("a", kT0, R"({"n":1})");
  put("b", kT0 + kSec, R"({"n":2})");
  put("a", kT0 + 2 * kSec, R"({"n":3})");
  auto r = store_->read([&](JobStore& s) { return s.reports(kT0); });
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].worker, "a");
  EXPECT_EQ((*r)[0].report, R"({"n":3})");
  EXPECT_EQ((*r)[0].updated, kT0 + 2 * kSec);
  auto recent = store_->read([&](JobStore& s) { return s.reports(kT0 + 2 * kSec); });
  ASSERT_TRUE(recent);
  EXPECT_EQ(recent->size(), 1u);
  put("c", kT0 + 200 * kSec, "{}");
  auto after = store_->read([&](JobStore& s) { return s.reports(0); });
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), 1u) << "reports not updated within the window are deleted";
  EXPECT_EQ((*after)[0].worker, "c");
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreTest, ::testing::ValuesIn(testing::backends()),
                         testing::backend_name);

}  // namespace
}  // namespace ratchet::store
