// http_json, the portal described in TOML alone, through the assembled engine
// against the mock portal server: for every rate-limit dialect the server
// speaks (X-RateLimit with a Unix-time or a delta reset, Retry-After in
// seconds or as an HTTP-date, IETF RateLimit with RateLimit-Policy, a bare
// 429) and for a share of 5xx answers. No limit is declared: the engine
// learns the pace from the server. What a user relies on: every job ends
// with its film's rating; a 429 is waited out and retried without using up a
// job attempt or a step retry; the wait parks the job instead of holding a
// worker; a call the server said when to retry is not refused again, and a
// bare 429 is backed off from instead of retried in a storm.
//
// Short real windows run the bursts; waits of a minute run on a FakeClock
// shared by the server and the engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "mock_portal/bodies.hpp"
#include "mock_portal/server.hpp"
#include "portal_run.hpp"
#include "ratchet/engine.hpp"

namespace ratchet {
namespace {

using namespace std::chrono_literals;
using mock_portal::Dialect;
using mock_portal::PortalOptions;
using testing::DialectCase;
using testing::limited;
using testing::PortalRun;

// http_json reading imdb's rating, one step per job, one attempt per job:
// any failure that reached the job would end it dead. `plugin_policy` is
// added to the plugin's section ([plugin.http_json.retry] and the like).
std::string http_json_config(const mock_portal::MockPortalServer& server, int workers,
                             const std::string& plugin_policy) {
  return testing::engine_section(workers) + "[plugin.http_json]\nurl = \"" + server.portal_url("imdb") +
         "/movies/{{args.name}}\"\nextract = \"/rating\"\noutput = \"rating\"\n" + plugin_policy +
         "\n[job.rate_movie]\nattempts = 1\nsteps = [{ name = \"imdb\", call = \"http_json.request\", "
         "args = { name = \"{{args.name}}\" } }]\n";
}

// Every job completed on its first attempt, its step ran once (waits and
// retries happen inside it), and its output is imdb's rating of its film.
void expect_rated_on_first_attempt(Engine& engine, const std::vector<JobId>& ids) {
  for (JobId id : ids) {
    auto job = engine.get(id);
    ASSERT_TRUE(job.has_value()) << job.error().to_string();
    ASSERT_EQ(job->state, JobState::kCompleted) << "job " << id << ": " << job->last_error;
    EXPECT_EQ(job->attempt, 1) << "job " << id;
    EXPECT_EQ(job->errors.size(), 0u) << "job " << id;
    ASSERT_EQ(job->steps.size(), 1u) << "job " << id;
    EXPECT_EQ(job->steps[0].attempts, 1) << "job " << id;
    const std::string film = job->args["name"];
    EXPECT_DOUBLE_EQ(job->steps[0].output["rating"].get<double>(), mock_portal::expected_rating("imdb", film))
        << film;
  }
}

bool was_parked(const JobRecord& job) {
  return std::any_of(job.timeline.begin(), job.timeline.end(),
                     [](const TimelineEntry& e) { return e.kind == "parked"; });
}

int parked_jobs(Engine& engine, const std::vector<JobId>& ids) {
  int parked = 0;
  for (JobId id : ids) {
    auto job = engine.get(id);
    if (job && was_parked(*job)) ++parked;
  }
  return parked;
}

// ---------------------------------------------------------------- bursts

// Six workers open with six films at once against a server that admits four
// per window: whatever the dialect, two calls are answered 429. The server's
// latency keeps all six in flight before the first answer, so the engine has
// learned nothing yet when they are sent.
constexpr int kBurst = 6;

PortalOptions bursty(Dialect dialect) {
  // A latency long enough for six calls to leave even in a sanitizer build
  // before the first answer (the plugin's first calls are paced a few
  // milliseconds apart until its server says something), and a window long
  // enough to count them all (the server counts a call when it answers).
  PortalOptions o = limited(dialect, 4, 1000ms);
  o.latency = 500ms;
  return o;
}

std::vector<DialectCase> burst_cases() {
  std::vector<DialectCase> cases;
  cases.push_back({"XRateLimitUnixReset", bursty(Dialect::kFixedWindow)});
  auto delta = bursty(Dialect::kFixedWindow);
  delta.reset_style = mock_portal::ResetStyle::kDeltaSeconds;
  cases.push_back({"XRateLimitDeltaReset", delta});
  // Two a second from a bucket of four: Retry-After rounds the wait for the
  // next token up to 1s, by when two are back.
  auto seconds = bursty(Dialect::kTokenBucket);
  seconds.limit = 2;
  seconds.window = 1000ms;
  seconds.burst = 4;
  cases.push_back({"RetryAfterSeconds", seconds});
  auto date = seconds;
  date.retry_after_style = mock_portal::RetryAfterStyle::kHttpDate;
  cases.push_back({"RetryAfterHttpDate", date});
  cases.push_back({"IetfRateLimit", bursty(Dialect::kIetf)});
  cases.push_back({"Bare429", bursty(Dialect::kBare429)});
  return cases;
}

// Sleeps until calls sent now, counted by the server when it answers
// `latency` later, land just after the wall clock enters a new `window`,
// where the server's fixed windows begin: a burst is then not split across
// two.
void wait_for_window_start(std::chrono::milliseconds window, std::chrono::milliseconds latency) {
  const auto into = (std::chrono::system_clock::now().time_since_epoch() + latency) % window;
  std::this_thread::sleep_for(window - into + 5ms);
}

class HttpJsonDialectTest : public ::testing::TestWithParam<DialectCase> {};

TEST_P(HttpJsonDialectTest, RateMovie_BurstOverServerLimit_429sWaitedOutAndEveryJobRatedOnFirstAttempt) {
  constexpr int kJobs = kBurst;
  mock_portal::ServerOptions options;
  options.portals["imdb"] = GetParam().options;
  // One try per call: throttling must not use up retry.attempts.
  PortalRun run = testing::open_run(
      "http-json-" + GetParam().name, options, [](const mock_portal::MockPortalServer& server) {
        return http_json_config(server, kBurst,
                                "[plugin.http_json.retry]\nattempts = 1\ninitial = \"20ms\"\nmax = \"1s\"\n");
      });
  ASSERT_TRUE(run.engine);
  // The engine is up before the burst, and the films go in one enqueue, so
  // the six calls leave together even in a slow (sanitizer) build, within
  // one server window.
  ASSERT_TRUE(run.engine->start().has_value());
  if (GetParam().options.dialect != Dialect::kTokenBucket)
    wait_for_window_start(GetParam().options.window, GetParam().options.latency);
  std::vector<nlohmann::json> films;
  for (const auto& name : testing::film_names(kJobs)) films.push_back({{"name", name}});
  auto ids = run.engine->enqueue_many("rate_movie", films);
  ASSERT_TRUE(ids.has_value()) << ids.error().to_string();
  run.ids = *ids;
  auto drained = run.engine->drain(30s);
  EXPECT_TRUE(drained.has_value()) << drained.error().to_string();
  run.engine->stop();
  expect_rated_on_first_attempt(*run.engine, run.ids);

  const auto server = run.server->stats().portals.at("imdb");
  const PluginCallStats calls = testing::call_stats_of(*run.engine, "http_json");
  // A server that states its quota does so in the first reply, which the
  // other calls wait for: none is refused. One that only refuses has the
  // opening burst refused in part. Each film was read once.
  const std::int64_t admitted_at_once = GetParam().options.burst.value_or(GetParam().options.limit);
  const Dialect dialect = GetParam().options.dialect;
  if (dialect == Dialect::kFixedWindow || dialect == Dialect::kIetf) {
    EXPECT_EQ(server.throttled, 0);
  } else {
    EXPECT_GT(server.throttled, 0);
  }
  EXPECT_EQ(server.ok, kJobs);
  EXPECT_EQ(server.errors, 0);
  // The engine counted every request and every 429, and retried the 429s as
  // throttling, not as failed calls.
  EXPECT_EQ(static_cast<std::int64_t>(calls.calls), server.requests);
  EXPECT_EQ(static_cast<std::int64_t>(calls.throttled), server.throttled);
  EXPECT_EQ(calls.retries, 0u);
  // The waits parked the jobs instead of holding workers.
  EXPECT_GT(calls.parks, 0u);
  EXPECT_GT(parked_jobs(*run.engine, run.ids), 0);
  if (GetParam().options.dialect == Dialect::kBare429) {
    // Told nothing about when, the engine backs off and slows down on its
    // own: a few 429s per refused call while the window lasts, not a storm.
    EXPECT_LE(server.throttled, 3 * kJobs);
  } else {
    // Told when, each refused call waited until then and was not refused again.
    EXPECT_LE(server.throttled, kBurst - admitted_at_once);
  }
  // The learned pace is listed, and holds no call back much longer than the
  // server's window.
  const auto now = std::chrono::system_clock::now();
  bool listed = false;
  for (const auto& l : run.engine->limits()) {
    if (l.plugin != "http_json") continue;
    listed = listed || l.declared.starts_with("learned");
    EXPECT_LT(l.next_free, now + 2s) << l.declared;
  }
  EXPECT_TRUE(listed);
}

INSTANTIATE_TEST_SUITE_P(Dialects, HttpJsonDialectTest, ::testing::ValuesIn(burst_cases()),
                         testing::dialect_case_name);

// ------------------------------------------------------------ 5xx share

TEST(HttpJsonPlugin, RateMovie_ServerFailsAQuarterOfCalls_RetriedInTheStepAndEveryJobRatedOnFirstAttempt) {
  constexpr int kJobs = 12;
  mock_portal::ServerOptions options;
  PortalOptions flaky = limited(Dialect::kNone, 100, 1000ms);
  flaky.error_rate = 0.25;
  options.portals["imdb"] = flaky;
  // Step retries absorb the 5xx. Five in a row open the circuit breaker; a
  // short open_for keeps the test short should the server's draw have a run.
  PortalRun run =
      testing::open_run("http-json-ServerErrors", options, [](const mock_portal::MockPortalServer& server) {
        return http_json_config(
            server, kBurst,
            "[plugin.http_json.retry]\nattempts = 10\ninitial = \"10ms\"\nmax = \"100ms\"\n"
            "[plugin.http_json.circuit_breaker]\nopen_for = \"100ms\"\n");
      });
  ASSERT_TRUE(run.engine);
  testing::run_films(run, "rate_movie", testing::film_names(kJobs), 30s);
  expect_rated_on_first_attempt(*run.engine, run.ids);

  const auto server = run.server->stats().portals.at("imdb");
  const PluginCallStats calls = testing::call_stats_of(*run.engine, "http_json");
  EXPECT_GT(server.errors, 0);
  EXPECT_EQ(server.ok, kJobs);
  EXPECT_EQ(server.throttled, 0);
  // Each 5xx was retried once within its step, and none was taken for throttling.
  EXPECT_EQ(static_cast<std::int64_t>(calls.calls), server.requests);
  EXPECT_EQ(static_cast<std::int64_t>(calls.retries), server.errors);
  EXPECT_EQ(calls.throttled, 0u);
}

TEST(HttpJsonPlugin, ConfiguredInToml_ReadsThePortalThroughTheEngine) {
  PortalRun run = testing::open_run("http-json-plain", {}, [](const mock_portal::MockPortalServer& server) {
    return http_json_config(server, kBurst, "");
  });
  ASSERT_TRUE(run.engine);
  testing::run_films(run, "rate_movie", {"The Dark Knight"}, 30s);
  expect_rated_on_first_attempt(*run.engine, run.ids);
  EXPECT_EQ(run.server->stats().portals.at("imdb").requests, 1);
}

// ----------------------------------------------------- a minute's wait

// One request per minute. The second film's call is told to wait a minute:
// by a 429 with Retry-After (the token bucket), or already by the first
// film's answer saying nothing remains until the reset (the dialects that
// send their quota on every answer), so the second call is never refused.
std::vector<DialectCase> minute_cases() { return testing::header_dialect_cases(1, 60s, 1, 60s); }

class HttpJsonMinuteWaitTest : public ::testing::TestWithParam<DialectCase> {};

TEST_P(HttpJsonMinuteWaitTest, SecondFilm_ServerSaysWaitAMinute_JobParkedUntilThenAndRated) {
  // The server and the engine read one FakeClock, which starts on a minute
  // boundary: the server's window and the engine's waits line up exactly.
  auto clock = std::make_shared<FakeClock>();
  const TimePoint t0 = clock->now();
  mock_portal::ServerOptions options;
  options.clock = clock;
  options.portals["imdb"] = GetParam().options;
  ConfigOverrides overrides;
  overrides.clock = clock;
  // One worker: the first film's answer is in before the second film's call.
  PortalRun run = testing::open_run(
      "http-json-minute-" + GetParam().name, options,
      [](const mock_portal::MockPortalServer& server) { return http_json_config(server, 1, ""); }, overrides);
  ASSERT_TRUE(run.engine);
  testing::enqueue_films(run, "rate_movie", {"Heat", "Up"});
  ASSERT_EQ(run.ids.size(), 2u);
  ASSERT_TRUE(run.engine->start().has_value());

  // The first film is rated at once; the second is parked, due back when the
  // server said, holding no worker. (The clock moves a millisecond at a
  // time meanwhile: before the server has said anything, the plugin's
  // first calls are spaced a few milliseconds apart.)
  auto state_of = [&](JobId id) {
    auto job = run.engine->get(id);
    return job ? job->state : JobState::kAvailable;
  };
  ASSERT_TRUE(testing::eventually([&] {
    if (state_of(run.ids[1]) != JobState::kScheduled) clock->advance(1ms);
    return state_of(run.ids[0]) == JobState::kCompleted && state_of(run.ids[1]) == JobState::kScheduled;
  })) << "first film "
      << to_string(state_of(run.ids[0])) << ", second " << to_string(state_of(run.ids[1]));
  auto parked = run.engine->get(run.ids[1]);
  ASSERT_TRUE(parked.has_value());
  EXPECT_TRUE(was_parked(*parked));
  EXPECT_EQ(parked->attempt, 1);
  EXPECT_GE(parked->run_at, t0 + 59s);
  EXPECT_LE(parked->run_at, t0 + 61s);
  EXPECT_EQ(testing::call_stats_of(*run.engine, "http_json").parks, 1u);

  const bool quota_on_every_answer = GetParam().options.dialect != Dialect::kTokenBucket;
  const auto before = run.server->stats().portals.at("imdb");
  EXPECT_EQ(before.ok, 1);
  EXPECT_EQ(before.throttled, quota_on_every_answer ? 0 : 1);
  EXPECT_EQ(before.requests, quota_on_every_answer ? 1 : 2);

  // Half-way through the minute nothing is sent.
  clock->advance(30s);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(state_of(run.ids[1]), JobState::kScheduled);
  EXPECT_EQ(run.server->stats().portals.at("imdb").requests, before.requests);

  // At the minute the job comes back and its one call succeeds.
  clock->advance(31s);
  auto drained = run.engine->drain(10s);
  ASSERT_TRUE(drained.has_value()) << drained.error().to_string();
  run.engine->stop();
  expect_rated_on_first_attempt(*run.engine, run.ids);
  const auto after = run.server->stats().portals.at("imdb");
  EXPECT_EQ(after.requests, before.requests + 1);
  EXPECT_EQ(after.ok, 2);
  EXPECT_EQ(after.throttled, before.throttled);
}

INSTANTIATE_TEST_SUITE_P(Dialects, HttpJsonMinuteWaitTest, ::testing::ValuesIn(minute_cases()),
                         testing::dialect_case_name);

}  // namespace
}  // namespace ratchet
