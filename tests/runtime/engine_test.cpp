// The embedding API with C++ handlers: enqueue checks, steps and replay,
// job retries and dead jobs, cancellation, parking, stop and release, lease
// takeover, events, purge.
#include <SQLiteCpp/Database.h>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "engine_fixture.hpp"
#include "runtime/job_run.hpp"
#include "store/sqlite/sqlite_store.hpp"

namespace ratchet::testing {
namespace {

JobTypeOptions typed_args() {
  JobTypeOptions o;
  o.args = {{"name", ArgKind::kString, true}, {"year", ArgKind::kInteger, false}};
  return o;
}

TEST_F(EngineFixture, Enqueue_UnknownType_NotFoundAndNothingWritten) {
  auto e = open();
  ASSERT_TRUE(e->define("known", [](StepContext&) { return nlohmann::json(); }));
  auto r = e->enqueue("unknwn", {{"a", 1}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.error().message().find("unknwn"), std::string::npos);
  EXPECT_NE(r.error().message().find("known"), std::string::npos) << "lists the defined types";
  EXPECT_TRUE(e->list()->empty());
}

TEST_F(EngineFixture, Enqueue_MismatchingArgs_InvalidArgumentNamingTypeAndFieldAndNothingWritten) {
  auto e = open();
  ASSERT_TRUE(e->define(
      "rate_movie", [](StepContext&) { return nlohmann::json(); }, typed_args()));
  struct Case {
    nlohmann::json args;
    std::string field;
  };
  for (const Case& c :
       {Case{{{"year", 1995}}, "name"}, Case{{{"name", 7}}, "name"},
        Case{{{"name", "Heat"}, {"year", "1995"}}, "year"},
        Case{{{"name", "Heat"}, {"director", "Mann"}}, "director"}, Case{nlohmann::json::array(), ""}}) {
    auto r = e->enqueue("rate_movie", c.args);
    ASSERT_FALSE(r) << c.args;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("rate_movie"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(c.field), std::string::npos) << r.error().message();
  }
  // enqueue_many is all or nothing.
  auto many = e->enqueue_many("rate_movie", {{{"name", "Heat"}}, {{"name", 3}}});
  ASSERT_FALSE(many);
  EXPECT_TRUE(e->list()->empty());
  EXPECT_TRUE(e->enqueue("rate_movie", {{"name", "Heat"}}));
}

TEST_F(EngineFixture, Handler_TwoSteps_RunOnceAndResultStored) {
  auto e = open();
  std::atomic<int> a_runs{0};
  ASSERT_TRUE(e->define("sum", [&](StepContext& ctx) {
    auto a = ctx.step("a", [&] {
      ++a_runs;
      return nlohmann::json(ctx.args()["x"].get<int>() * 2);
    });
    auto b = ctx.step("b", [&] { return nlohmann::json(a.get<int>() + 1); });
    return nlohmann::json{{"b", b}, {"key", ctx.idempotency_key("b")}};
  }));
  auto id = e->enqueue("sum", {{"x", 20}});
  ASSERT_TRUE(id);
  ASSERT_TRUE(e->start());
  ASSERT_TRUE(e->drain(20s));
  auto j = e->get(*id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::kCompleted);
  EXPECT_EQ(j->result["b"], 41);
  EXPECT_EQ(j->result["key"], std::to_string(*id) + ":b");
  ASSERT_EQ(j->steps.size(), 2u);
  EXPECT_EQ(j->steps[0].output, 40);
  EXPECT_EQ(j->attempt, 1);
  EXPECT_EQ(a_runs.load(), 1);
}

TEST_F(EngineFixture, Backlog_EachCallHearsOfTheJobsBehindItAndTheLastOfNone) {
  // A learned pace holds a window's last units back to probe where the
  // window ends only while more calls are to come (limit/adaptive_pacer):
  // the jobs claimed that no worker runs yet, and the database's beyond.
  auto e = open(/*workers=*/1);
  std::mutex mu;
  std::vector<std::int64_t> heard;
  ASSERT_TRUE(
      e->define("ask", [&](StepContext& ctx) { return ctx.call("q", "p.op", nlohmann::json::object()); }));
  caller_->on("p.op", [&](const runtime::StepCall&) {
    std::lock_guard lock(mu);
    heard.push_back(caller_->backlog().value_or(-1));
    return runtime::CallOutcome::ok(1);
  });
  constexpr int kJobs = 7;
  for (int i = 0; i < kJobs; ++i) ASSERT_TRUE(e->enqueue("ask", nlohmann::json::object()));
  EXPECT_FALSE(caller_->backlog()) << "told before the engine runs";
  ASSERT_TRUE(e->start());
  ASSERT_TRUE(e->drain(20s));
  e->stop();
  EXPECT_FALSE(caller_->backlog()) << "still told once the engine stopped";
  std::lock_guard lock(mu);
  ASSERT_EQ(heard.size(), static_cast<std::size_t>(kJobs));
  // One worker: the first call has the other six behind it, claimed or in
  // the database; the last has none.
  EXPECT_GE(heard.front(), 1) << "the first call heard of no job behind it";
  EXPECT_EQ(heard.back(), 0) << "the last call heard of jobs still to come";
  for (const std::int64_t n : heard) EXPECT_GE(n, 0);
}

TEST_F(EngineFixture, Backlog_JobsResumedFromAParkAreNotHeardAgain) {
  // A job parked for a limiter slot holds that slot: the limiter counts it
  // already. Heard again as a job still to come when it resumes, the calls
  // of a run's last window were taken for more than the window holds, and
  // its last units held back for probes at the window's end.
  auto e = open(/*workers=*/1);
  std::mutex mu;
  std::vector<std::int64_t> resumed_heard;
  std::map<std::string, int> calls;
  ASSERT_TRUE(e->define("ask", [&](StepContext& ctx) {
    return ctx.call("q", "p.op", {{"n", ctx.args().at("n")}});
  }));
  caller_->on("p.op", [&](const runtime::StepCall& c) {
    std::lock_guard lock(mu);
    if (++calls[c.args.dump()] == 1)
      return runtime::CallOutcome::park_until(clock_->now() + 10s, "slot at +10s");
    resumed_heard.push_back(caller_->backlog().value_or(-1));
    return runtime::CallOutcome::ok(1);
  });
  constexpr int kJobs = 6;
  std::vector<JobId> ids;
  for (int i = 0; i < kJobs; ++i) {
    auto id = e->enqueue("ask", {{"n", i}});
    ASSERT_TRUE(id);
    ids.push_back(*id);
  }
  ASSERT_TRUE(e->start());
  for (const JobId id : ids) wait_state(*e, id, JobState::kScheduled);
  clock_->advance(10s);
  EngineAccess::impl(*e).wake();
  for (const JobId id : ids) wait_state(*e, id, JobState::kCompleted);
  e->stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(resumed_heard.size(), static_cast<std::size_t>(kJobs));
  for (const std::int64_t n : resumed_heard)
    EXPECT_EQ(n, 0) << "a resumed job was heard as a call still to come";
}

TEST_F(EngineFixture, Handler_NextStepStarts_EveryEarlierCheckpointIsAlreadyCommitted) {
  auto e = open();
  const auto path = options().database;
  auto committed = [&](JobId id) {
    SQLite::Database db(path.string(), SQLite::OPEN_READONLY);
    SQLite::Statement q(db,
                        "SELECT group_concat(name, ',') FROM (SELECT name FROM steps WHERE job_id = ? AND "
                        "state = 'completed' ORDER BY name)");
    q.bind(1, id);
    return q.executeStep() && !q.getColumn(0).isNull() ? q.getColumn(0).getString() : std::string();
  };
  std::mutex mu;
  std::vector<std::string> seen;
  auto see = [&](JobId id) {
    auto now = committed(id);
    std::lock_guard lock(mu);
    seen.push_back(now);
  };
  ASSERT_TRUE(e->define("three", [&](StepContext& ctx) {
    ctx.step("a", [&] {
      see(ctx.job_id());
      return nlohmann::json(1);
    });
    ctx.step("b", [&] {
      see(ctx.job_id());
      return nlohmann::json(2);
    });
    ctx.step("c", [&] {
      see(ctx.job_id());
      return nlohmann::json(3);
    });
    return nlohmann::json("done");
  }));
  auto id = e->enqueue("three", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, *id, JobState::kCompleted);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"", "a", "a,b"}));
  ASSERT_EQ(j.steps.size(), 3u) << "the last step's checkpoint is written with the completion";
  EXPECT_EQ(committed(*id), "a,b,c");
}

TEST_F(EngineFixture, Events_CompletedEvent_ArrivesOnceCommittedAndItsCallbackMayUseTheEngine) {
  auto e = open();
  ASSERT_TRUE(
      e->define("first", [](StepContext& ctx) { return ctx.step("s", [] { return nlohmann::json(7); }); }));
  ASSERT_TRUE(e->define("second", [](StepContext&) { return nlohmann::json("second"); }));
  std::mutex mu;
  std::optional<JobState> state_at_event;
  std::optional<JobId> follow_up;
  e->subscribe([&](const JobEvent& ev) {
    if (ev.kind != JobEvent::Kind::kCompleted || ev.type != "first") return;
    // A callback that reads and enqueues: events never run where that would
    // wait for itself.
    auto j = e->get(ev.id);
    auto next = e->enqueue("second", nlohmann::json::object());
    std::lock_guard lock(mu);
    if (j) state_at_event = j->state;
    if (next) follow_up = *next;
  });
  ASSERT_TRUE(e->enqueue("first", nlohmann::json::object()));
  ASSERT_TRUE(e->start());
  for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
    {
      std::lock_guard lock(mu);
      if (follow_up) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  std::optional<JobId> next;
  {
    std::lock_guard lock(mu);
    ASSERT_TRUE(follow_up) << "the completed event never arrived or its enqueue failed";
    EXPECT_EQ(state_at_event, JobState::kCompleted);
    next = follow_up;
  }
  EngineAccess::impl(*e).wake();
  auto j = wait_state(*e, *next, JobState::kCompleted);
  EXPECT_EQ(j.result, "second");
}

TEST_F(EngineFixture, Handler_FailsAfterAStep_RetriedWithBackoffAndCommittedStepNotRerun) {
  auto e = open();
  std::atomic<int> a_runs{0}, b_runs{0};
  JobTypeOptions o;
  o.attempts = 3;
  o.backoff.initial = 10s;
  o.backoff.jitter = false;
  ASSERT_TRUE(e->define(
      "flaky",
      [&](StepContext& ctx) {
        ctx.step("a", [&] { return nlohmann::json(++a_runs); });
        return ctx.step("b", [&]() -> nlohmann::json {
          if (++b_runs == 1) throw std::runtime_error("upstream said no");
          return "ok";
        });
      },
      o));
  std::vector<JobEvent> events;
  std::mutex mu;
  e->subscribe([&](const JobEvent& ev) {
    std::lock_guard lock(mu);
    events.push_back(ev);
  });
  auto id = e->enqueue("flaky", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, *id, JobState::kRetryable);
  EXPECT_EQ(j.run_at, clock_->now() + 10s) << "backoff of the first attempt is `initial`";
  ASSERT_EQ(j.errors.size(), 1u);
  EXPECT_EQ(j.errors[0].step, "b");
  EXPECT_NE(j.errors[0].error.find("upstream said no"), std::string::npos);
  clock_->advance(10s);
  EngineAccess::impl(*e).wake();
  j = wait_state(*e, *id, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 2);
  EXPECT_EQ(a_runs.load(), 1) << "a committed step never runs again";
  EXPECT_EQ(b_runs.load(), 2);
  e->stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kFailed);
  EXPECT_EQ(events[1].kind, JobEvent::Kind::kCompleted);
  EXPECT_EQ(events[1].result, "ok");
}

TEST_F(EngineFixture, Handler_AlwaysFails_DeadAfterLastAttemptThenRetryByHandRunsAgain) {
  auto e = open();
  std::atomic<bool> heal{false};
  JobTypeOptions o;
  o.attempts = 2;
  o.backoff.initial = 1s;
  o.backoff.jitter = false;
  ASSERT_TRUE(e->define(
      "doomed",
      [&](StepContext&) -> nlohmann::json {
        if (!heal) throw std::runtime_error("always");
        return "healed";
      },
      o));
  std::atomic<int> dead{0};
  e->subscribe([&](const JobEvent& ev) { dead += ev.kind == JobEvent::Kind::kDead; });
  auto id = e->enqueue("doomed", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  wait_state(*e, *id, JobState::kRetryable);
  clock_->advance(1s);
  EngineAccess::impl(*e).wake();
  auto j = wait_state(*e, *id, JobState::kDead);
  EXPECT_EQ(j.attempt, 2);
  EXPECT_EQ(j.errors.size(), 2u);
  heal = true;
  ASSERT_TRUE(e->retry(*id));
  j = wait_state(*e, *id, JobState::kCompleted);
  EXPECT_EQ(j.result, "healed");
  auto again = e->retry(*id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kInvalidArgument);
  e->stop();  // events are published after their write commits; stop() waits for them
  EXPECT_EQ(dead.load(), 1);
}

TEST_F(EngineFixture, Cancel_PendingJob_NeverRuns) {
  auto e = open();
  std::atomic<int> runs{0};
  ASSERT_TRUE(e->define("t", [&](StepContext&) { return nlohmann::json(++runs); }));
  EnqueueOptions later;
  later.delay = 1h;
  auto id = e->enqueue("t", nlohmann::json::object(), later);
  ASSERT_TRUE(e->cancel(*id));
  EXPECT_EQ(e->get(*id)->state, JobState::kCancelled);
  ASSERT_TRUE(e->start());
  clock_->advance(2h);
  ASSERT_TRUE(e->drain(20s));
  EXPECT_EQ(runs.load(), 0);
  auto again = e->cancel(*id);
  EXPECT_TRUE(again) << "cancelling a cancelled job is harmless";
}

TEST_F(EngineFixture, Cancel_RunningJob_StopsAtNextStepBoundaryKeepingCommittedSteps) {
  auto e = open();
  std::latch in_first(1), go_on(1);
  std::atomic<bool> second_ran{false};
  ASSERT_TRUE(e->define("long", [&](StepContext& ctx) {
    ctx.step("first", [&] {
      in_first.count_down();
      go_on.wait();
      return nlohmann::json(1);
    });
    ctx.step("second", [&] {
      second_ran = true;
      return nlohmann::json(2);
    });
    return nlohmann::json();
  }));
  std::atomic<int> cancelled{0};
  e->subscribe([&](const JobEvent& ev) { cancelled += ev.kind == JobEvent::Kind::kCancelled; });
  auto id = e->enqueue("long", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  in_first.wait();
  ASSERT_TRUE(e->cancel(*id));
  go_on.count_down();
  auto j = wait_state(*e, *id, JobState::kCancelled);
  EXPECT_FALSE(second_ran.load());
  ASSERT_EQ(j.steps.size(), 1u);
  EXPECT_EQ(j.steps[0].name, "first");
  e->stop();
  EXPECT_EQ(cancelled.load(), 1);
}

TEST_F(EngineFixture, Timeout_RunPastItsJobTypeTimeout_InterruptedAndAttemptFailsNamingTheTimeout) {
  auto opts = options();
  opts.lease = std::chrono::minutes(10);  // the fake minute below must not expire the lease
  auto e = open(std::move(opts));
  std::latch in_slow(1);
  std::atomic<bool> after_ran{false};
  std::atomic<int> runs{0};
  JobTypeOptions o;
  o.attempts = 2;
  o.backoff.initial = std::chrono::seconds(1);
  o.backoff.jitter = false;
  o.timeout = std::chrono::minutes(1);
  ASSERT_TRUE(e->define(
      "slow",
      [&](StepContext& ctx) {
        ctx.step("quick", [] { return nlohmann::json(1); });
        if (++runs == 1) {
          ctx.step("stuck", [&] {
            in_slow.count_down();
            // Work that only ends when the engine interrupts it.
            std::mutex mu;
            std::condition_variable_any cv;
            std::unique_lock lock(mu);
            cv.wait(lock, ctx.stop_token(), [] { return false; });
            return nlohmann::json(2);
          });
        }
        ctx.step("after", [&] {
          after_ran = true;
          return nlohmann::json(3);
        });
        return nlohmann::json();
      },
      o));
  auto id = *e->enqueue("slow", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  in_slow.wait();
  clock_->advance(std::chrono::seconds(59));
  EXPECT_EQ(e->get(id)->state, JobState::kRunning) << "not timed out before its minute";
  clock_->advance(std::chrono::seconds(1));
  auto j = wait_state(*e, id, JobState::kRetryable);
  EXPECT_FALSE(after_ran.load()) << "no step starts past the timeout";
  ASSERT_EQ(j.errors.size(), 1u);
  EXPECT_NE(j.errors[0].error.find("timeout of 1m"), std::string::npos) << j.errors[0].error;
  EXPECT_NE(j.errors[0].error.find("\"slow\""), std::string::npos) << j.errors[0].error;
  // The next attempt replays the committed step and finishes in time.
  clock_->advance(std::chrono::seconds(1));
  EngineAccess::impl(*e).wake();
  j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 2);
  EXPECT_TRUE(after_ran.load());
}

TEST_F(EngineFixture, Drain_JobsOfATypeDefinedOnlyElsewhere_NotWaitedFor) {
  auto mine = open();
  ASSERT_TRUE(mine->define("mine", [](StepContext&) { return nlohmann::json(1); }));
  {
    // Another program on the same database enqueues work only it runs.
    auto theirs = open();
    ASSERT_TRUE(theirs->define("theirs", [](StepContext&) { return nlohmann::json(2); }));
    ASSERT_TRUE(theirs->enqueue("theirs", nlohmann::json::object()));
  }
  auto id = *mine->enqueue("mine", nlohmann::json::object());
  ASSERT_TRUE(mine->start());
  auto drained = mine->drain(20s);
  ASSERT_TRUE(drained) << drained.error().to_string();
  EXPECT_EQ(mine->get(id)->state, JobState::kCompleted);
  auto counts = mine->counts();
  ASSERT_TRUE(counts);
  std::int64_t available = 0;
  for (const auto& [state, n] : *counts) available += state == JobState::kAvailable ? n : 0;
  EXPECT_EQ(available, 1) << "the other program's job is still there, untouched";
}

TEST_F(EngineFixture, Enqueue_UniqueKeyHeldByLiveJob_ReturnsThatJob) {
  auto e = open();
  ASSERT_TRUE(e->define("t", [](StepContext&) { return nlohmann::json(); }));
  EnqueueOptions keyed;
  keyed.unique_key = "movie:heat";
  auto a = e->enqueue("t", nlohmann::json::object(), keyed);
  auto b = e->enqueue("t", nlohmann::json::object(), keyed);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(e->list()->size(), 1u);
}

TEST_F(EngineFixture, Call_ThrottledLongerThanThreshold_ParksWithoutUsingAnAttemptAndFreesTheWorker) {
  auto e = open(/*workers=*/1);
  std::atomic<int> prep_runs{0};
  std::atomic<int> slow_calls{0};
  caller_->on("slow.get", [&](const runtime::StepCall&) {
    if (++slow_calls == 1)
      return runtime::CallOutcome::park_until(clock_->now() + 30s, "limiter slow: 1/min");
    return runtime::CallOutcome::ok({{"rating", 8}});
  });
  caller_->on("fast.get", [](const runtime::StepCall&) { return runtime::CallOutcome::ok(1); });
  ASSERT_TRUE(e->define("slow_job", [&](StepContext& ctx) {
    ctx.step("prep", [&] { return nlohmann::json(++prep_runs); });
    return ctx.call("rating", "slow.get", {{"q", 1}});
  }));
  ASSERT_TRUE(e->define("fast_job", [&](StepContext& ctx) { return ctx.call("one", "fast.get", {}); }));
  auto slow = e->enqueue("slow_job", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, *slow, JobState::kScheduled);
  EXPECT_EQ(j.run_at, clock_->now() + 30s);
  EXPECT_EQ(j.attempt, 1);
  ASSERT_FALSE(j.timeline.empty());
  EXPECT_EQ(j.timeline.back().kind, "parked");
  EXPECT_NE(j.timeline.back().detail.find("limiter slow"), std::string::npos);
  EXPECT_NE(j.timeline.back().detail.find("until +30s"), std::string::npos) << j.timeline.back().detail;
  // The single worker is free for a job on another plugin.
  auto fast = e->enqueue("fast_job", nlohmann::json::object());
  wait_state(*e, *fast, JobState::kCompleted);
  EXPECT_EQ(e->get(*slow)->state, JobState::kScheduled);
  clock_->advance(30s);
  EngineAccess::impl(*e).wake();
  j = wait_state(*e, *slow, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 1) << "a park does not use up an attempt";
  EXPECT_EQ(j.result["rating"], 8);
  EXPECT_EQ(prep_runs.load(), 1) << "the step before the park is replayed, not rerun";
  EXPECT_EQ(slow_calls.load(), 2);
  EXPECT_EQ(caller_->last_key("rating"), std::to_string(*slow) + ":rating");
}

TEST_F(EngineFixture, Stop_WithAJobMidway_ReleasesItWithCheckpointsAndAnotherEngineFinishesIt) {
  std::atomic<int> first_runs{0}, second_runs{0};
  std::latch in_second(1);
  auto handler = [&](StepContext& ctx) {
    ctx.step("first", [&] { return nlohmann::json(++first_runs); });
    return ctx.step("second", [&] {
      if (++second_runs == 1) {
        in_second.count_down();
        // Interrupted once the grace period is over.
        while (!ctx.stop_token().stop_requested()) std::this_thread::sleep_for(1ms);
        throw std::runtime_error("interrupted");
      }
      return nlohmann::json("done");
    });
  };
  JobId id = 0;
  {
    auto o = options(1);
    o.shutdown_grace = 0s;
    auto e = open(o);
    ASSERT_TRUE(e->define("two", handler));
    id = *e->enqueue("two", nlohmann::json::object());
    ASSERT_TRUE(e->start());
    in_second.wait();
    e->stop();
    auto j = e->get(id);
    ASSERT_TRUE(j);
    EXPECT_NE(j->state, JobState::kRunning);
    EXPECT_NE(j->state, JobState::kCompleted);
  }
  auto e = open();
  ASSERT_TRUE(e->define("two", handler));
  ASSERT_TRUE(e->start());
  clock_->advance(1h);  // past any retry backoff
  EngineAccess::impl(*e).wake();
  auto j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(first_runs.load(), 1);
  EXPECT_EQ(j.result, "done");
}

TEST_F(EngineFixture, Stop_WithinGrace_StepFinishesAndJobIsReleasedAtTheBoundary) {
  auto e = open(1);
  std::latch in_first(1);
  std::atomic<int> second_runs{0};
  ASSERT_TRUE(e->define("two", [&](StepContext& ctx) {
    ctx.step("first", [&] {
      in_first.count_down();
      // Still in flight when stop() asks the run to stop.
      while (!dynamic_cast<runtime::JobRun&>(ctx).stopping()) std::this_thread::sleep_for(1ms);
      return nlohmann::json(1);
    });
    return ctx.step("second", [&] { return nlohmann::json(++second_runs); });
  }));
  auto id = *e->enqueue("two", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  in_first.wait();
  e->stop();
  auto j = e->get(id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::kAvailable);
  EXPECT_EQ(j->attempt, 1);
  ASSERT_EQ(j->steps.size(), 1u);
  EXPECT_EQ(j->steps[0].state, "completed");
  EXPECT_EQ(second_runs.load(), 0);
  EXPECT_EQ(j->timeline.back().kind, "released");
}

// A parked job falls due for another process a second after its time, so
// that the process holding its slot takes it first; one that stops hands
// its parked jobs over, and another engine runs them at their time.
TEST_F(EngineFixture, Stop_JobsItParkedFallDueForAnotherEngineAtTheirTime) {
  std::atomic<int> calls{0};
  caller_->on("slow.get", [&](const runtime::StepCall&) {
    if (++calls == 1) return runtime::CallOutcome::park_until(clock_->now() + 30s, "limiter slow: 1/min");
    return runtime::CallOutcome::ok(1);
  });
  auto handler = [&](StepContext& ctx) { return ctx.call("one", "slow.get", {}); };
  JobId id = 0;
  {
    auto e = open(1);
    ASSERT_TRUE(e->define("slow_job", handler));
    id = *e->enqueue("slow_job", nlohmann::json::object());
    ASSERT_TRUE(e->start());
    wait_state(*e, id, JobState::kScheduled);
    e->stop();
  }
  auto other = open(1);
  ASSERT_TRUE(other->define("slow_job", handler));
  ASSERT_TRUE(other->start());
  clock_->advance(30s);
  EngineAccess::impl(*other).wake();
  auto j = wait_state(*other, id, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 1);
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(EngineFixture, LeaseExpired_JobOfAVanishedWorker_IsTakenOverAndResumesAfterItsCheckpoint) {
  std::atomic<int> a_runs{0};
  auto e = open();
  ASSERT_TRUE(e->define("resume", [&](StepContext& ctx) {
    auto a = ctx.step("a", [&] { return nlohmann::json(++a_runs); });
    return ctx.step("b", [&] { return nlohmann::json(a.get<int>() + 100); });
  }));
  auto id = *e->enqueue("resume", nlohmann::json::object());
  // A worker in another process claims it, commits step a, and dies.
  {
    store::DatabaseOptions dbo;
    dbo.path = dir_.file("engine.db");
    auto ghost = store::SqliteStore::open(dbo);
    ASSERT_TRUE(ghost);
    store::Micros now = store::to_micros(clock_->now());
    auto c = (*ghost)->write([&](store::JobStore& s) {
      return s.claim({"ghost", now, now + 30'000'000, 1, {"resume"}, {}, 3});
    });
    ASSERT_TRUE(c);
    ASSERT_EQ(c->jobs.size(), 1u);
    ASSERT_TRUE((*ghost)->write([&](store::JobStore& s) {
      return s.checkpoint({id, {"ghost", c->jobs[0].token}, "a", "7", now, now}, now + 30'000'000, now);
    }));
  }
  ASSERT_TRUE(e->start());
  clock_->advance(31s);
  EngineAccess::impl(*e).wake();
  auto j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(a_runs.load(), 0) << "step a committed by the dead worker is not run again";
  EXPECT_EQ(j.result, 107);
  EXPECT_EQ(j.lease_expiries, 1);
  EXPECT_EQ(j.attempt, 2);
  ASSERT_FALSE(j.errors.empty());
  EXPECT_NE(j.errors[0].error.find("lease expired"), std::string::npos);
}

TEST_F(EngineFixture, LeaseExpired_RunStalledPastItsLease_CommitsNothingOnceItsOwnerNameClaimedTheJobAgain) {
  auto o = options(1);
  o.worker_id = "w";
  auto e = open(o);
  std::latch in_b(1);
  std::atomic<bool> go{false};
  std::atomic<int> c_runs{0};
  ASSERT_TRUE(e->define("three", [&](StepContext& ctx) {
    ctx.step("a", [] { return nlohmann::json(1); });
    ctx.step("b", [&] {
      in_b.count_down();
      // Stalled (paused, or its clock behind) until the job was claimed again.
      while (!go) std::this_thread::sleep_for(1ms);
      return nlohmann::json("stale");
    });
    return ctx.step("c", [&] { return nlohmann::json(++c_runs); });
  }));
  auto id = *e->enqueue("three", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  in_b.wait();
  // Another engine under the same owner name, whose clock is past the lease,
  // claims the job again.
  store::DatabaseOptions dbo;
  dbo.path = dir_.file("engine.db");
  auto other = store::SqliteStore::open(dbo);
  ASSERT_TRUE(other);
  const store::Micros later = store::to_micros(clock_->now() + 31s);
  auto c = (*other)->write([&](store::JobStore& s) {
    return s.claim({"w", later, later + 30'000'000, 1, {"three"}, {}, 3});
  });
  ASSERT_TRUE(c);
  ASSERT_EQ(c->jobs.size(), 1u);
  const store::Fence current{"w", c->jobs[0].token};
  EXPECT_EQ(c->jobs[0].checkpoints.count("a"), 1u);

  go = true;
  e->stop();  // lets the stalled run reach its next boundary
  EXPECT_EQ(c_runs.load(), 0) << "the run that lost its claim stops at its next boundary";
  auto j = e->get(id);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->state, JobState::kRunning) << "neither completed nor released by the stale run";
  EXPECT_EQ(j->steps.size(), 1u) << "step b of the stale run is not committed";

  // The claim that took the job over is the one that commits.
  auto w = (*other)->write([&](store::JobStore& s) {
    return s.checkpoint({id, current, "b", "\"current\"", later, later}, later + 30'000'000, later).held &&
           s.complete(id, current, "\"done\"", later).held;
  });
  ASSERT_TRUE(w);
  EXPECT_TRUE(*w);
  j = e->get(id);
  EXPECT_EQ(j->state, JobState::kCompleted);
  ASSERT_EQ(j->steps.size(), 2u);
  for (const auto& step : j->steps) {
    if (step.name == "b") {
      EXPECT_EQ(step.output, "current");
    }
  }
}

// Keeps the lines logged while it is attached to the default logger.
class LogLines final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

// A database that refuses a run's checkpoints (here: its file replaced
// under the engine) gives the run up; that was logged as "lease lost;
// leaving it to its new owner", which sent users looking for another worker.
TEST_F(EngineFixture, CheckpointsTheDatabaseRefuses_LoggedAsGivenUpNotAsALostLease) {
  auto log = std::make_shared<LogLines>();
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(log);
  {
    auto e = open(1);
    const auto db = dir_.file("engine.db");
    ASSERT_TRUE(e->define("two", [&](StepContext& ctx) {
      ctx.step("a", [&] {
        std::filesystem::copy_file(db, dir_.file("copy.db"));
        std::filesystem::rename(dir_.file("copy.db"), db);
        return nlohmann::json("a");
      });
      return ctx.step("b", [] { return nlohmann::json("b"); });
    }));
    ASSERT_TRUE(e->enqueue("two", nlohmann::json::object()));
    ASSERT_TRUE(e->start());
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    auto given_up = [&] {
      for (const auto& line : log->lines())
        if (line.find("given up, as its checkpoints could not be written") != std::string::npos) return true;
      return false;
    };
    while (!given_up() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(given_up());
  }
  logger->sinks().pop_back();
  for (const auto& line : log->lines()) EXPECT_EQ(line.find("lease lost"), std::string::npos) << line;
}

TEST_F(EngineFixture, DatabaseLocked_PastTheBusyTimeoutWhileJobsRun_NoStepCalledTwiceAndNoLeaseExpiry) {
  constexpr int kJobs = 40;
  constexpr int kWorkers = 4;
  auto o = options(kWorkers);
  o.busy_timeout = 100ms;
  auto e = open(o);
  std::mutex mu;
  std::map<std::pair<JobId, std::string>, int> calls;
  std::atomic<int> started{0};
  std::atomic<int> held_back{0};
  std::atomic<bool> locked{false};
  auto call = [&](StepContext& ctx, const std::string& step) {
    {
      std::lock_guard lock(mu);
      ++calls[{ctx.job_id(), step}];
    }
    // The first steps run freely; the next few are in flight when another
    // process takes the write lock, and succeed while it holds it.
    const int n = ++started;
    if (n > kWorkers && n <= 2 * kWorkers) {
      ++held_back;
      while (!locked) std::this_thread::sleep_for(1ms);
    }
    return nlohmann::json(step);
  };
  ASSERT_TRUE(e->define("two", [&](StepContext& ctx) {
    ctx.step("a", [&] { return call(ctx, "a"); });
    return ctx.step("b", [&] { return call(ctx, "b"); });
  }));
  std::vector<nlohmann::json> args(kJobs, nlohmann::json::object());
  auto ids = e->enqueue_many("two", args);
  ASSERT_TRUE(ids);
  ASSERT_TRUE(e->start());
  while (held_back < kWorkers) std::this_thread::sleep_for(1ms);
  {
    SQLite::Database other(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE, 10'000);
    other.exec("BEGIN IMMEDIATE");
    locked = true;
    // Five busy timeouts of real time: the checkpoints of the steps that
    // succeeded meanwhile wait for the lock, their leases (fake time) last.
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(EngineAccess::impl(*e).store->stalled());
    other.exec("ROLLBACK");
  }
  auto drained = e->drain(20s);
  if (!drained) {
    // Show what the runs given up lead to: their leases expire and their
    // steps are called again.
    clock_->advance(31s);
    EngineAccess::impl(*e).wake();
    (void)e->drain(20s);
  }
  EXPECT_TRUE(drained) << "every job completes once the lock is released";
  for (JobId id : *ids) {
    auto j = e->get(id);
    ASSERT_TRUE(j);
    EXPECT_EQ(j->state, JobState::kCompleted) << "job " << id;
    EXPECT_EQ(j->lease_expiries, 0) << "job " << id;
    EXPECT_EQ(j->attempt, 1) << "job " << id;
  }
  std::lock_guard lock(mu);
  for (const auto& [key, n] : calls) {
    EXPECT_EQ(n, 1) << "job " << key.first << " step " << key.second << " was called " << n << " times";
  }
  EXPECT_EQ(calls.size(), static_cast<std::size_t>(2 * kJobs));
}

// The database stays out of reach (here a lock another process holds)
// past a running job's lease: its process lives on but cannot renew the
// lease. Before, the claim that found it expired once the lock was gone
// judged a crash of a job that ran alone, and with max_lease_expiries = 1
// the job ended dead; now the expiry is no crash, and the job runs again
// with its attempt and completes.
TEST_F(EngineFixture, DatabaseLockedPastTheLease_TheExpiryIsNoCrashAndTheJobCompletes) {
  auto o = options(1);
  o.busy_timeout = 50ms;
  o.lease = 30s;
  o.heartbeat = 10s;
  o.max_lease_expiries = 1;
  auto e = open(o);
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  ASSERT_TRUE(e->define("slow", [&](StepContext& ctx) {
    return ctx.step("s", [&] {
      if (++calls == 1) {
        while (!release) std::this_thread::sleep_for(1ms);
      }
      return nlohmann::json(1);
    });
  }));
  auto id = *e->enqueue("slow", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  while (calls == 0) std::this_thread::sleep_for(1ms);
  const auto real_deadline = [] { return std::chrono::steady_clock::now() + 10s; };
  {
    SQLite::Database other(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE, 10'000);
    other.exec("BEGIN IMMEDIATE");
    // A heartbeat: its renewal waits for the lock...
    clock_->advance(10s);
    auto& store = *EngineAccess::impl(*e).store;
    for (auto until = real_deadline(); !store.stalled() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(store.stalled());
    // ...until the lease runs out, and the renewal is given up.
    clock_->advance(21s);
    for (auto until = real_deadline(); store.stalled() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(1ms);
    ASSERT_FALSE(store.stalled());
    other.exec("ROLLBACK");
  }
  release = true;
  const JobRecord j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 1) << "the outage used up no attempt";
  EXPECT_EQ(j.lease_expiries, 1);
  EXPECT_EQ(calls, 2) << "the step whose checkpoint could not be written runs again";
  bool told = false;
  for (const auto& ev : j.timeline) {
    told = told || ev.detail.find("while the database was out of reach") != std::string::npos;
  }
  EXPECT_TRUE(told) << "the job's timeline says why its lease expired";
}

TEST_F(EngineFixture, Heartbeat_RenewsLeasesOfRunningJobs) {
  auto o = options(1);
  o.lease = 30s;
  o.heartbeat = 10s;
  auto e = open(o);
  std::latch started(1);
  std::atomic<bool> finish{false};
  ASSERT_TRUE(e->define("slow", [&](StepContext& ctx) {
    return ctx.step("s", [&] {
      started.count_down();
      while (!finish) std::this_thread::sleep_for(1ms);
      return nlohmann::json(1);
    });
  }));
  auto id = *e->enqueue("slow", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  started.wait();
  TimePoint first = *e->get(id)->lease_expires_at;
  for (int i = 0; i < 50 && *e->get(id)->lease_expires_at == first; ++i) {
    clock_->advance(10s);
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(*e->get(id)->lease_expires_at, first);
  finish = true;
  wait_state(*e, id, JobState::kCompleted);
}

TEST_F(EngineFixture, Purge_OldTerminalJobs_Removed) {
  auto e = open();
  ASSERT_TRUE(e->define("t", [](StepContext&) { return nlohmann::json(); }));
  auto id = *e->enqueue("t", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  ASSERT_TRUE(e->drain(20s));
  clock_->advance(2h);
  auto n = e->purge(1h);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(e->get(id).error().code(), ErrorCode::kNotFound);
}

// Spans past 64 bits of nanoseconds wrapped: a purge reaching back 600
// years deleted jobs that had just finished. Out of range is an error, and
// nothing is deleted or written.
TEST_F(EngineFixture, PurgeAndEnqueue_SpansPastAHundredYears_RefusedChangingNothing) {
  auto e = open();
  ASSERT_TRUE(e->define("t", [](StepContext&) { return nlohmann::json(); }));
  auto id = *e->enqueue("t", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  ASSERT_TRUE(e->drain(20s));
  for (Duration age : {Duration(kMaxScheduleSpan + std::chrono::hours(1)), Duration::max(), Duration(-1h)}) {
    auto n = e->purge(age);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(e->get(id));
  for (Duration delay : {Duration(kMaxScheduleSpan + std::chrono::hours(1)), Duration(-1s)}) {
    EnqueueOptions o;
    o.delay = delay;
    EXPECT_EQ(e->enqueue("t", nlohmann::json::object(), o).error().code(), ErrorCode::kInvalidArgument);
  }
  EnqueueOptions far;
  far.run_at = TimePoint(Duration::max());
  EXPECT_EQ(e->enqueue("t", nlohmann::json::object(), far).error().code(), ErrorCode::kInvalidArgument);
  far.run_at = clock_->now() + kMaxScheduleSpan;
  EXPECT_TRUE(e->enqueue("t", nlohmann::json::object(), far));
}

// The bound is on the JSON text stored: control characters take six bytes
// there, and 900 KB of them was stored as 5 MB.
TEST_F(EngineFixture, Enqueue_ArgumentsOverAMebibyteOnlyOnceEscaped_Refused) {
  auto e = open();
  ASSERT_TRUE(e->define("t", [](StepContext&) { return nlohmann::json(); }));
  auto r = e->enqueue("t", nlohmann::json{{"blob", std::string(900'000, '\x01')}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("bytes as JSON, over the limit of 1 MiB"), std::string::npos)
      << r.error().message();
  EXPECT_TRUE(e->enqueue("t", nlohmann::json{{"blob", std::string(170'000, '\x01')}}));
}

TEST_F(EngineFixture, Handler_SameStepNameTwice_FailsTheAttemptClearly) {
  auto e = open();
  JobTypeOptions o;
  o.attempts = 1;
  ASSERT_TRUE(e->define(
      "dup",
      [](StepContext& ctx) {
        ctx.step("x", [] { return nlohmann::json(1); });
        return ctx.step("x", [] { return nlohmann::json(2); });
      },
      o));
  auto id = *e->enqueue("dup", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kDead);
  EXPECT_NE(j.last_error.find("used twice"), std::string::npos) << j.last_error;
}

TEST(EngineOpen, BadDatabaseFiles_ClearDatabaseErrors) {
  TempDir dir;
  EngineOptions o;
  o.database = dir.file("text.db");
  { std::ofstream(o.database) << std::string(4096, 'x'); }
  auto e = Engine::open(o);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(e.error().message().find("text.db"), std::string::npos);
}

TEST_F(EngineFixture, Enqueue_DatabaseLockedByAnotherProcess_DatabaseErrorAndNothingWritten) {
  auto e = open();
  ASSERT_TRUE(e->define("t", [](StepContext&) { return nlohmann::json(); }));
  SQLite::Database other(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  auto r = e->enqueue("t", nlohmann::json::object());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(r.error().message().find("locked"), std::string::npos) << r.error().message();
  other.exec("ROLLBACK");
  EXPECT_TRUE(e->list()->empty());
}

}  // namespace
}  // namespace ratchet::testing

namespace ratchet::testing {
namespace {

// Arguments written to the database by something other than enqueue (an
// older ratchet, a hand-made row) nested far past the bound: the worker
// that claims the job fails it with the bound's message instead of
// recursing through the JSON, and the job can still be read.
TEST_F(EngineFixture, StoredArgumentsNestedTooDeep_WorkerFailsTheJobNamingTheBound) {
  auto e = open();
  std::atomic<int> ran{0};
  JobTypeOptions o;
  o.attempts = 1;
  ASSERT_TRUE(e->define(
      "deep",
      [&](StepContext&) {
        ++ran;
        return nlohmann::json();
      },
      o));
  // Past what can be read back without recursing, and past the bound only.
  std::map<JobId, int> depth;
  for (int d : {200'000, 100}) {
    auto id = e->enqueue("deep", {{"a", 1}});
    ASSERT_TRUE(id);
    depth[*id] = d;
    SQLite::Database other(dir_.file("engine.db").string(), SQLite::OPEN_READWRITE, 10'000);
    SQLite::Statement u(other, "UPDATE jobs SET args = ? WHERE id = ?");
    u.bind(1, "{\"a\":" + std::string(d, '[') + std::string(d, ']') + "}");
    u.bind(2, *id);
    ASSERT_EQ(u.exec(), 1);
  }
  ASSERT_TRUE(e->start());
  for (const auto& [id, d] : depth) {
    JobRecord r = wait_state(*e, id, JobState::kDead);
    EXPECT_NE(r.last_error.find("64 levels"), std::string::npos) << d << ": " << r.last_error;
    EXPECT_NE(r.last_error.find("stored arguments"), std::string::npos) << d << ": " << r.last_error;
    if (d > 1000) {
      EXPECT_TRUE(r.args.is_string()) << "shown as not loaded, not as its contents";
    }
  }
  EXPECT_EQ(ran.load(), 0);
  auto listed = e->list();
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 2u);
}

}  // namespace
}  // namespace ratchet::testing
