// The five portal plugins through the assembled engine against the mock
// portal server, for every rate-limit dialect the server speaks and for
// malformed bodies and malformed rate-limit headers. No limits are declared
// here: the engine learns the pace from what each server says. (http_json
// against the same dialects: http_json_dialects_test.cpp.)
#include <gtest/gtest.h>

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

// Five portals, each calling its plugin; job attempts and step retries
// generous enough that throttling alone never kills a job.
std::string oscar_config(const mock_portal::MockPortalServer& server, int job_attempts) {
  std::string toml = testing::engine_section();
  for (const auto& p : mock_portal::portal_names()) {
    toml += "[plugin." + p + "]\nbase_url = \"" + server.portal_url(p) + "\"\n";
    toml += "[plugin." + p + ".retry]\nattempts = 20\ninitial = \"20ms\"\nmax = \"2s\"\n\n";
  }
  toml += "[job.rate_movie]\nattempts = " + std::to_string(job_attempts) + "\nsteps = [\n";
  for (const auto& p : mock_portal::portal_names()) {
    toml +=
        "  { name = \"" + p + "\", call = \"" + p + ".get_rating\", args = { name = \"{{args.name}}\" } },\n";
  }
  return toml + "]\n";
}

PortalRun run_jobs(const std::string& name, const PortalOptions& portal, int jobs, int job_attempts = 5) {
  mock_portal::ServerOptions options;
  for (const auto& p : mock_portal::portal_names()) options.portals[p] = portal;
  PortalRun run = testing::open_run(
      "dialect-" + name, options,
      [&](const mock_portal::MockPortalServer& server) { return oscar_config(server, job_attempts); });
  if (run.engine) testing::run_films(run, "rate_movie", testing::film_names(jobs), 90s);
  return run;
}

void expect_all_rated(const PortalRun& run) {
  for (JobId id : run.ids) {
    auto job = run.engine->get(id);
    ASSERT_TRUE(job.has_value());
    ASSERT_EQ(job->state, JobState::kCompleted) << "job " << id << ": " << job->last_error;
    std::string movie = job->args["name"];
    for (const auto& step : job->steps) {
      EXPECT_DOUBLE_EQ(step.output["rating"].get<double>(), mock_portal::expected_rating(step.name, movie))
          << step.name << " " << movie;
    }
  }
}

class PortalDialectTest : public ::testing::TestWithParam<DialectCase> {};

TEST_P(PortalDialectTest, RateMovie_LimitLearnedFromServer_EveryRatingRight) {
  constexpr int kJobs = 24;
  PortalRun run = run_jobs(GetParam().name, GetParam().options, kJobs);
  ASSERT_TRUE(run.engine);
  expect_all_rated(run);
  auto stats = run.server->stats();
  for (const auto& p : mock_portal::portal_names()) {
    const auto& s = stats.portals.at(p);
    EXPECT_EQ(s.ok, kJobs) << p;
    // Throttled answers happen while the pace is learned; they stay a
    // minority of requests instead of a retry storm.
    EXPECT_LE(s.throttled, kJobs) << p << " answered 429 " << s.throttled << " times";
  }
}

std::vector<DialectCase> dialect_cases() {
  std::vector<DialectCase> cases = testing::header_dialect_cases(8, 500ms, 16, 1000ms);
  cases.push_back({"Bare429", limited(Dialect::kBare429, 8, 500ms)});
  auto errors = limited(Dialect::kNone, 100, 1000ms);
  errors.error_rate = 0.2;
  cases.push_back({"ServerErrors", errors});
  auto skewed = limited(Dialect::kFixedWindow, 8, 500ms);
  skewed.date_skew = std::chrono::seconds(-300);
  cases.push_back({"ServerClockFiveMinutesBehind", skewed});
  for (auto m : {mock_portal::MalformedHeaders::kGarbage, mock_portal::MalformedHeaders::kPast}) {
    auto bad = limited(Dialect::kTokenBucket, 16, 1000ms);
    bad.malformed_headers = m;
    cases.push_back(
        {m == mock_portal::MalformedHeaders::kGarbage ? "GarbageHeaders" : "ResetInThePast", bad});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Dialects, PortalDialectTest, ::testing::ValuesIn(dialect_cases()),
                         testing::dialect_case_name);

TEST(PortalDialect, ResetYearsAhead_WaitIsCappedNotFrozen) {
  // Every answer says the window resets in ten years while requests remain:
  // no limiter may be left pointing years ahead. (The reset is capped at an
  // hour and what remains is paced over it, so these calls come seconds apart.)
  auto far = limited(Dialect::kFixedWindow, 1000, 1000ms);
  far.malformed_headers = mock_portal::MalformedHeaders::kFarFuture;
  PortalRun run = run_jobs("FarFuture", far, 4);
  ASSERT_TRUE(run.engine);
  expect_all_rated(run);
  auto now = std::chrono::system_clock::now();
  for (const auto& l : run.engine->limits()) {
    EXPECT_LT(l.next_free, now + std::chrono::hours(2)) << l.plugin << " " << l.declared;
  }
}

TEST(PortalDialect, MalformedBody_StepFailsWithTheBodysFirstBytes) {
  PortalOptions broken;
  broken.malformed_body = mock_portal::MalformedBody::kHtml;
  PortalRun run = run_jobs("MalformedBody", broken, 1, /*job_attempts=*/1);
  ASSERT_TRUE(run.engine);
  ASSERT_EQ(run.ids.size(), 1u);
  auto job = run.engine->get(run.ids[0]);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->state, JobState::kDead);
  ASSERT_FALSE(job->errors.empty());
  EXPECT_NE(job->errors[0].error.find("<"), std::string::npos) << job->errors[0].error;
  // A malformed body is fatal: one request per portal, no retries.
  auto stats = run.server->stats();
  EXPECT_LE(stats.portals.at(job->errors[0].step).requests, 1);
}

}  // namespace
}  // namespace ratchet
