// Declarative job types: steps calling plugin operations through a fake
// StepCaller, `after` dependencies, concurrency, templates, replay, parking.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine_fixture.hpp"

namespace ratchet::testing {
namespace {

config::StepSpec step(std::string name, std::string call, nlohmann::json args,
                      std::vector<std::string> after = {}) {
  config::StepSpec s;
  s.name = std::move(name);
  auto dot = call.find('.');
  s.plugin = call.substr(0, dot);
  s.operation = call.substr(dot + 1);
  s.args = std::move(args);
  s.after = std::move(after);
  return s;
}

config::JobTypeSpec movie_type() {
  config::JobTypeSpec t;
  t.name = "rate_movie";
  t.attempts = 3;
  t.backoff.initial = std::chrono::seconds(5);
  t.backoff.jitter = config::Jitter::kNone;
  t.args = {{"name", config::ArgType::kString, true}};
  t.steps = {
      step("imdb", "imdb.get_rating", {{"name", "{{args.name}}"}}),
      step("rt", "rt.get_rating", {{"title", "{{args.name}}"}}),
      step("summary", "store.save",
           {{"imdb", "{{steps.imdb.output.rating}}"}, {"line", "{{args.name}}: {{steps.rt.output.score}}%"}},
           {"imdb", "rt"}),
  };
  return t;
}

TEST_F(EngineFixture, Dag_IndependentStepsRunConcurrentlyAndDependentOneSeesTheirOutputs) {
  auto e = open();
  ASSERT_TRUE(runtime::define_declarative(*e, movie_type()));
  // Each first-level call waits (bounded) for the other to be in flight.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool concurrent = false;
  auto meet = [&] {
    std::unique_lock lock(mu);
    ++arrived;
    cv.notify_all();
    if (cv.wait_for(lock, std::chrono::seconds(5), [&] { return arrived >= 2; })) concurrent = true;
  };
  caller_->on("imdb.get_rating", [&](const runtime::StepCall&) {
    meet();
    return runtime::CallOutcome::ok({{"rating", 8.3}});
  });
  caller_->on("rt.get_rating", [&](const runtime::StepCall&) {
    meet();
    return runtime::CallOutcome::ok({{"score", 87}});
  });
  caller_->on("store.save", [](const runtime::StepCall& c) { return runtime::CallOutcome::ok(c.args); });
  auto id = e->enqueue("rate_movie", {{"name", "Heat"}});
  ASSERT_TRUE(id);
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, *id, JobState::kCompleted);
  EXPECT_TRUE(concurrent) << "imdb and rt do not depend on each other and must run at once";
  EXPECT_EQ(caller_->last_args("imdb")["name"], "Heat");
  EXPECT_EQ(caller_->last_args("rt")["title"], "Heat");
  EXPECT_EQ(caller_->last_args("summary")["imdb"], 8.3) << "a whole placeholder keeps the JSON type";
  EXPECT_EQ(caller_->last_args("summary")["line"], "Heat: 87%");
  EXPECT_EQ(j.result["imdb"]["rating"], 8.3);
  EXPECT_EQ(j.result["summary"]["line"], "Heat: 87%");
  EXPECT_EQ(caller_->last_key("summary"), std::to_string(*id) + ":summary");
}

TEST_F(EngineFixture, Dag_StepFailsThenJobRetried_CommittedStepsNotCalledAgain) {
  auto e = open();
  ASSERT_TRUE(runtime::define_declarative(*e, movie_type()));
  std::atomic<int> rt_calls{0};
  caller_->on("imdb.get_rating", [](const runtime::StepCall&) {
    return runtime::CallOutcome::ok({{"rating", 7}});
  });
  caller_->on("rt.get_rating", [&](const runtime::StepCall&) {
    if (++rt_calls == 1) return runtime::CallOutcome::failed(Error::plugin("rt: 503 after 3 tries"));
    return runtime::CallOutcome::ok({{"score", 50}});
  });
  caller_->on("store.save", [](const runtime::StepCall& c) { return runtime::CallOutcome::ok(c.args); });
  auto id = *e->enqueue("rate_movie", {{"name", "Ran"}});
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kRetryable);
  ASSERT_EQ(j.errors.size(), 1u);
  EXPECT_EQ(j.errors[0].step, "rt");
  EXPECT_NE(j.errors[0].error.find("503"), std::string::npos);
  EXPECT_EQ(caller_->calls("summary"), 0) << "a step after a failed one does not start";
  clock_->advance(std::chrono::seconds(5));
  EngineAccess::impl(*e).wake();
  j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(caller_->calls("imdb"), 1);
  EXPECT_EQ(caller_->calls("rt"), 2);
  EXPECT_EQ(caller_->calls("summary"), 1);
  EXPECT_EQ(j.attempt, 2);
}

TEST_F(EngineFixture, Dag_StepParks_JobScheduledAndOtherPluginJobsProceed) {
  auto e = open(/*workers=*/1);
  auto t = movie_type();
  ASSERT_TRUE(runtime::define_declarative(*e, t));
  config::JobTypeSpec other;
  other.name = "other";
  other.steps = {step("only", "fast.op", nlohmann::json::object())};
  ASSERT_TRUE(runtime::define_declarative(*e, other));
  std::atomic<int> imdb_calls{0};
  caller_->on("imdb.get_rating", [&](const runtime::StepCall&) {
    if (++imdb_calls == 1)
      return runtime::CallOutcome::park_until(clock_->now() + std::chrono::minutes(1), "daily quota");
    return runtime::CallOutcome::ok({{"rating", 9}});
  });
  caller_->on("rt.get_rating", [](const runtime::StepCall&) {
    return runtime::CallOutcome::ok({{"score", 1}});
  });
  caller_->on("store.save", [](const runtime::StepCall& c) { return runtime::CallOutcome::ok(c.args); });
  caller_->on("fast.op", [](const runtime::StepCall&) { return runtime::CallOutcome::ok(true); });
  auto id = *e->enqueue("rate_movie", {{"name", "Alien"}});
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kScheduled);
  EXPECT_EQ(j.run_at, clock_->now() + std::chrono::minutes(1));
  auto o = *e->enqueue("other", nlohmann::json::object());
  wait_state(*e, o, JobState::kCompleted);
  clock_->advance(std::chrono::minutes(1));
  EngineAccess::impl(*e).wake();
  j = wait_state(*e, id, JobState::kCompleted);
  EXPECT_EQ(j.attempt, 1);
  EXPECT_EQ(caller_->calls("rt"), 1) << "the step that committed before the park is replayed";
  EXPECT_EQ(imdb_calls.load(), 2);
}

TEST_F(EngineFixture, Dag_OneStepParks_SiblingWaitingBrieflyStillCallsInTheSameRun) {
  auto e = open();
  ASSERT_TRUE(runtime::define_declarative(*e, movie_type()));
  std::mutex mu;
  std::condition_variable cv;
  bool imdb_parked = false;
  std::atomic<int> rt_calls{0};
  std::atomic<bool> rt_waiting{false};
  caller_->on("imdb.get_rating", [&](const runtime::StepCall&) {
    std::lock_guard lock(mu);
    imdb_parked = true;
    cv.notify_all();
    return runtime::CallOutcome::park_until(clock_->now() + std::chrono::minutes(1), "daily quota");
  });
  caller_->on("rt.get_rating", [&](const runtime::StepCall&) {
    if (++rt_calls == 1) {
      // rt's slot comes 10ms later, after imdb has parked the run: a short
      // wait, taken in place.
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(5), [&] { return imdb_parked; });
      auto outcome =
          runtime::CallOutcome::park_until(clock_->now() + std::chrono::milliseconds(10), "rate limit");
      rt_waiting = true;  // its slot's time is fixed: the clock may move now
      return outcome;
    }
    return runtime::CallOutcome::ok({{"score", 64}});
  });
  caller_->on("store.save", [](const runtime::StepCall& c) { return runtime::CallOutcome::ok(c.args); });
  auto id = *e->enqueue("rate_movie", {{"name", "Ran"}});
  ASSERT_TRUE(e->start());
  // rt is now waiting for its slot on the fake clock.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       !rt_waiting.load() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  clock_->advance(std::chrono::milliseconds(10));
  auto j = wait_state(*e, id, JobState::kScheduled);
  EXPECT_EQ(rt_calls.load(), 2) << "imdb's park must not cut short a sibling whose slot is due";
  bool rt_committed = false;
  for (const auto& st : j.steps) rt_committed = rt_committed || (st.name == "rt" && st.output["score"] == 64);
  EXPECT_TRUE(rt_committed);
  EXPECT_EQ(caller_->calls("summary"), 0);
}

// A fatal failure beside a parked sibling ends the attempt once: parking
// instead would resume the job and call the failing step again for ever.
TEST_F(EngineFixture, Dag_StepFailsFatallyWhileSiblingParks_AttemptFailsOnceWithItsError) {
  auto e = open();
  auto t = movie_type();
  t.attempts = 1;
  ASSERT_TRUE(runtime::define_declarative(*e, t));
  std::mutex mu;
  std::condition_variable cv;
  bool imdb_parked = false;
  caller_->on("imdb.get_rating", [&](const runtime::StepCall&) {
    std::lock_guard lock(mu);
    imdb_parked = true;
    cv.notify_all();
    return runtime::CallOutcome::park_until(clock_->now() + std::chrono::minutes(1), "rate limit");
  });
  caller_->on("rt.get_rating", [&](const runtime::StepCall&) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return imdb_parked; });
    return runtime::CallOutcome::failed(Error::plugin("rt: the reply is not JSON"));
  });
  caller_->on("store.save", [](const runtime::StepCall& c) { return runtime::CallOutcome::ok(c.args); });
  auto id = *e->enqueue("rate_movie", {{"name", "Heat"}});
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kDead);
  EXPECT_EQ(j.attempt, 1);
  ASSERT_EQ(j.errors.size(), 1u);
  EXPECT_EQ(j.errors[0].step, "rt");
  EXPECT_NE(j.errors[0].error.find("not JSON"), std::string::npos) << j.errors[0].error;
  EXPECT_NE(j.last_error.find("not JSON"), std::string::npos) << j.last_error;
  clock_->advance(std::chrono::minutes(2));
  EngineAccess::impl(*e).wake();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(caller_->calls("rt"), 1) << "a dead job calls nothing again";
  const auto forgotten = caller_->forgotten();
  EXPECT_NE(std::find(forgotten.begin(), forgotten.end(), std::pair<JobId, int>{id, 1}), forgotten.end())
      << "the parked sibling's reserved slot is given back";
}

TEST_F(EngineFixture, Dag_TemplateNamesMissingArgument_StepFailsWithClearError) {
  auto e = open();
  config::JobTypeSpec t;
  t.name = "bad_template";
  t.attempts = 1;
  t.steps = {step("s", "p.op", {{"x", "{{args.nope}}"}})};
  ASSERT_TRUE(runtime::define_declarative(*e, t));
  auto id = *e->enqueue("bad_template", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kDead);
  EXPECT_NE(j.last_error.find("nope"), std::string::npos) << j.last_error;
  EXPECT_EQ(caller_->calls("s"), 0);
}

TEST_F(EngineFixture, Dag_Cycle_JobFailsNamingTheStuckSteps) {
  auto e = open();
  config::JobTypeSpec t;
  t.name = "cyclic";
  t.attempts = 1;
  t.steps = {step("a", "p.op", {}, {"b"}), step("b", "p.op", {}, {"a"})};
  ASSERT_TRUE(runtime::define_declarative(*e, t));
  auto id = *e->enqueue("cyclic", nlohmann::json::object());
  ASSERT_TRUE(e->start());
  auto j = wait_state(*e, id, JobState::kDead);
  EXPECT_NE(j.last_error.find("cycle"), std::string::npos) << j.last_error;
}

}  // namespace
}  // namespace ratchet::testing
