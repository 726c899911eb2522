// What the assembled engine's call stats say about waiting steps: the steps
// parked now (and that the count falls however the wait ends: the job comes
// back, is cancelled here or by another process, or its attempt fails), the
// time waited for limiter slots, and how long step calls took.
//
// imdb is limited to one call an hour, so of two films the second parks for
// an hour. Engine and server read one FakeClock: the hour passes when the
// test says, and waits and durations come out exact.
#include <gtest/gtest.h>

#include <atomic>

#include "mock_portal/server.hpp"
#include "pipeline/parked_steps.hpp"
#include "pipeline/plugin_step_caller.hpp"
#include "portal_run.hpp"
#include "ratchet/engine.hpp"

namespace ratchet {
namespace {

using namespace std::chrono_literals;
using testing::PortalRun;

// One worker, so the first film takes the hour's slot before the second asks.
std::string one_an_hour_config(const mock_portal::MockPortalServer& server) {
  return testing::engine_section(1) + "[plugin.imdb]\nbase_url = \"" + server.portal_url("imdb") +
         "\"\n[[plugin.imdb.limit]]\nrate = 1\nper = \"1h\"\n\n"
         "[job.rate_on_imdb]\nattempts = 1\nsteps = [{ name = \"imdb\", call = \"imdb.get_rating\", "
         "args = { name = \"{{args.name}}\" } }]\n";
}

class ParkedStepsTest : public ::testing::Test {
 protected:
  // Opens the engine and enqueues two films of `type`; the first completes,
  // the second parks behind the limit.
  void start_two(const std::string& type = "rate_on_imdb") {
    mock_portal::ServerOptions options;
    options.clock = clock_;
    ConfigOverrides overrides;
    overrides.clock = clock_;
    run_ = testing::open_run(::testing::UnitTest::GetInstance()->current_test_info()->name(), options,
                             one_an_hour_config, overrides);
    ASSERT_TRUE(run_.engine);
    if (type != "rate_on_imdb") define_giving_up(type);
    testing::enqueue_films(run_, type, {"Heat", "Up"});
    ASSERT_EQ(run_.ids.size(), 2u);
    ASSERT_TRUE(run_.engine->start().has_value());
    ASSERT_TRUE(testing::eventually([&] {
      return state_of(run_.ids[0]) == JobState::kCompleted && state_of(run_.ids[1]) == JobState::kScheduled;
    })) << "first film "
        << to_string(state_of(run_.ids[0])) << ", second " << to_string(state_of(run_.ids[1]));
  }

  // A job type calling imdb that fails instead, once give_up_ is set.
  void define_giving_up(const std::string& type) {
    JobTypeOptions options;
    options.attempts = 1;
    auto handler = [this](StepContext& ctx) {
      if (give_up_.load()) throw std::runtime_error("gave up");
      return ctx.call("imdb", "imdb.get_rating", {{"name", ctx.args()["name"]}});
    };
    ASSERT_TRUE(run_.engine->define(type, handler, options).has_value());
  }

  JobState state_of(JobId id) {
    auto job = run_.engine->get(id);
    return job ? job->state : JobState::kAvailable;
  }
  PluginCallStats imdb() { return testing::call_stats_of(*run_.engine, "imdb"); }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::atomic<bool> give_up_{false};
  PortalRun run_;
};

TEST_F(ParkedStepsTest, JobComesBackAndCompletes_GaugeFallsAndWaitAndDurationAreTheHour) {
  start_two();
  EXPECT_EQ(imdb().parked_now, 1u);
  EXPECT_EQ(imdb().parks, 1u);

  // The wait still going on counts as it grows.
  clock_->advance(10min);
  EXPECT_EQ(imdb().limiter_wait, 10min);
  EXPECT_EQ(imdb().parked_now, 1u);

  clock_->advance(51min);
  ASSERT_TRUE(run_.engine->drain(10s).has_value());
  run_.engine->stop();
  EXPECT_EQ(state_of(run_.ids[1]), JobState::kCompleted);

  const PluginCallStats stats = imdb();
  EXPECT_EQ(stats.parked_now, 0u);
  EXPECT_EQ(stats.limiter_wait, 61min);
  EXPECT_EQ(stats.calls, 2u);
  ASSERT_EQ(stats.step_durations.size(), 1u);
  EXPECT_EQ(stats.step_durations[0].operation, "get_rating");
  const DurationHistogram& h = stats.step_durations[0].durations;
  EXPECT_EQ(h.count, 2u);
  EXPECT_EQ(h.sum, 61min) << "the first film took no time on the fake clock, the second its wait";
  ASSERT_EQ(h.counts.size(), h.bounds.size() + 1);
  EXPECT_EQ(h.counts.front(), 1u);
  EXPECT_EQ(h.counts.back(), 1u) << "61 minutes is past the last bound, an hour";
}

TEST_F(ParkedStepsTest, JobCancelledWhileParked_GaugeFallsAtOnceAndTheWaitStopsGrowing) {
  start_two();
  clock_->advance(5min);
  // Read now, the database is not read again within the second: the cancel
  // itself must tell.
  EXPECT_EQ(imdb().parked_now, 1u);
  ASSERT_TRUE(run_.engine->cancel(run_.ids[1]).has_value());

  EXPECT_EQ(imdb().parked_now, 0u);
  EXPECT_EQ(imdb().limiter_wait, 5min);
  clock_->advance(5min);
  EXPECT_EQ(imdb().limiter_wait, 5min);
  const PluginCallStats stats = imdb();
  ASSERT_EQ(stats.step_durations.size(), 1u);
  EXPECT_EQ(stats.step_durations[0].durations.count, 1u) << "a cancelled wait has no outcome to time";
}

TEST_F(ParkedStepsTest, JobCancelledByAnotherProcess_GaugeFallsOnceTheDatabaseIsReadAgain) {
  start_two();
  EXPECT_EQ(imdb().parked_now, 1u);

  EngineOptions options;
  options.database = run_.dir.path() / "jobs.db";
  options.clock = clock_;
  auto other = Engine::open(options);
  ASSERT_TRUE(other.has_value()) << other.error().to_string();
  ASSERT_TRUE((*other)->cancel(run_.ids[1]).has_value());

  clock_->advance(1s);
  EXPECT_EQ(imdb().parked_now, 0u);
}

TEST_F(ParkedStepsTest, AttemptFailsWhenTheJobComesBack_GaugeFalls) {
  start_two("imdb_or_give_up");
  EXPECT_EQ(imdb().parked_now, 1u);

  give_up_.store(true);
  clock_->advance(61min);
  ASSERT_TRUE(run_.engine->drain(10s).has_value());
  run_.engine->stop();
  EXPECT_EQ(state_of(run_.ids[1]), JobState::kDead);
  EXPECT_EQ(imdb().parked_now, 0u);
  EXPECT_EQ(imdb().limiter_wait, 61min);
}

TEST(StepDurationHistogram, Observe_ValuesOnAndAroundTheBounds_CountEachInTheFirstBucketThatHoldsIt) {
  DurationHistogram h = pipeline::step_duration_histogram();
  ASSERT_FALSE(h.bounds.empty());
  ASSERT_TRUE(std::is_sorted(h.bounds.begin(), h.bounds.end()));
  pipeline::observe(h, Duration::zero());
  pipeline::observe(h, h.bounds[1]);
  pipeline::observe(h, h.bounds[1] + 1ns);
  pipeline::observe(h, h.bounds.back() + 1s);
  pipeline::observe(h, -1s);  // a clock set back

  EXPECT_EQ(h.count, 5u);
  EXPECT_EQ(h.sum, h.bounds[1] * 2 + 1ns + h.bounds.back() + 1s);
  ASSERT_EQ(h.counts.size(), h.bounds.size() + 1);
  EXPECT_EQ(h.counts[0], 2u);
  EXPECT_EQ(h.counts[1], 1u);
  EXPECT_EQ(h.counts[2], 1u);
  EXPECT_EQ(h.counts.back(), 1u);
}

// The same attempt of a step run twice in one process at once (its lease ran
// out while the first run went on, and the job was claimed again): each run
// has a CallState of its own, never one shared by two threads.
TEST(ParkedStepsEntries, ComeBackWhileAnotherCallHasTheEntryInHand_GetsANewEntry) {
  pipeline::ParkedSteps steps;
  const pipeline::ParkedSteps::Key key{7, "imdb", 1};
  const TimePoint now{};
  auto first = steps.come_back(key, "imdb", now);
  auto second = steps.come_back(key, "imdb", now);
  EXPECT_NE(first, second);
  EXPECT_NE(&first->call, &second->call);
  // Parked, an entry is the one its step comes back to.
  steps.park(key, second);
  EXPECT_EQ(steps.come_back(key, "imdb", now), second);
  // The first run's outcome does not drop the entry of the second.
  steps.remove(key, first);
  steps.park(key, second);
  EXPECT_EQ(steps.come_back(key, "imdb", now), second);
}

}  // namespace
}  // namespace ratchet
