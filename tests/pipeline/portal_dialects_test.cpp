// The five portal plugins and http_json through the assembled engine against
// the mock portal server, for every rate-limit dialect the server speaks and
// for malformed bodies and malformed rate-limit headers. No limits are
// declared here: the engine learns the pace from what each server says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mock_portal/bodies.hpp"
#include "mock_portal/server.hpp"
#include "ratchet/engine.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using mock_portal::Dialect;
using mock_portal::PortalOptions;

struct DialectCase {
  std::string name;
  PortalOptions options;
};

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("ratchet-dialect-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Five portals, each calling its plugin; job attempts and step retries
// generous enough that throttling alone never kills a job.
std::string oscar_config(const mock_portal::MockPortalServer& server, int job_attempts) {
  std::string toml = "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" RATCHET_PLUGIN_DIR
                     "\"\nworkers = 8\npark_threshold = \"20ms\"\npoll_interval = \"20ms\"\n\n";
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

struct PortalRun {
  std::unique_ptr<mock_portal::MockPortalServer> server;
  std::unique_ptr<Engine> engine;
  std::vector<JobId> ids;
  fs::path dir;
};

PortalRun run_jobs(const std::string& name, const PortalOptions& portal, int jobs, int job_attempts = 5) {
  PortalRun run;
  run.dir = fresh_dir(name);
  mock_portal::ServerOptions options;
  for (const auto& p : mock_portal::portal_names()) options.portals[p] = portal;
  auto server = mock_portal::MockPortalServer::start(options);
  EXPECT_TRUE(server.has_value());
  if (!server) return run;
  run.server = std::move(*server);
  std::ofstream(run.dir / "ratchet.toml") << oscar_config(*run.server, job_attempts);
  auto engine = Engine::open_config(run.dir / "ratchet.toml");
  EXPECT_TRUE(engine.has_value()) << engine.error().to_string();
  if (!engine) return run;
  run.engine = std::move(*engine);
  for (int i = 0; i < jobs; ++i) {
    auto id = run.engine->enqueue("rate_movie", {{"name", "film " + std::to_string(i)}});
    EXPECT_TRUE(id.has_value());
    if (id) run.ids.push_back(*id);
  }
  EXPECT_TRUE(run.engine->start().has_value());
  auto drained = run.engine->drain(90s);
  EXPECT_TRUE(drained.has_value()) << drained.error().to_string();
  run.engine->stop();
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
  fs::remove_all(run.dir);
}

PortalOptions limited(Dialect d, std::int64_t limit, std::chrono::milliseconds window) {
  PortalOptions o;
  o.dialect = d;
  o.limit = limit;
  o.window = window;
  return o;
}

std::vector<DialectCase> dialect_cases() {
  std::vector<DialectCase> cases;
  cases.push_back({"XRateLimitUnixReset", limited(Dialect::kFixedWindow, 8, 500ms)});
  auto delta = limited(Dialect::kFixedWindow, 8, 500ms);
  delta.reset_style = mock_portal::ResetStyle::kDeltaSeconds;
  cases.push_back({"XRateLimitDeltaReset", delta});
  cases.push_back({"RetryAfterSeconds", limited(Dialect::kTokenBucket, 16, 1000ms)});
  auto date = limited(Dialect::kTokenBucket, 16, 1000ms);
  date.retry_after_style = mock_portal::RetryAfterStyle::kHttpDate;
  cases.push_back({"RetryAfterHttpDate", date});
  cases.push_back({"IetfRateLimit", limited(Dialect::kIetf, 8, 500ms)});
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
                         [](const ::testing::TestParamInfo<DialectCase>& param) { return param.param.name; });

TEST(PortalDialect, ResetYearsAhead_WaitIsCappedNotFrozen) {
  // Every answer says the window resets in ten years while requests remain:
  // nothing should wait, and no limiter may be left pointing years ahead.
  auto far = limited(Dialect::kFixedWindow, 1000, 1000ms);
  far.malformed_headers = mock_portal::MalformedHeaders::kFarFuture;
  PortalRun run = run_jobs("FarFuture", far, 10);
  ASSERT_TRUE(run.engine);
  expect_all_rated(run);
  auto now = std::chrono::system_clock::now();
  for (const auto& l : run.engine->limits()) {
    EXPECT_LT(l.next_free, now + std::chrono::hours(2)) << l.plugin << " " << l.declared;
  }
  fs::remove_all(run.dir);
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
  fs::remove_all(run.dir);
}

TEST(HttpJsonPlugin, ConfiguredInToml_ReadsThePortalThroughTheEngine) {
  fs::path dir = fresh_dir("HttpJson");
  auto server = mock_portal::MockPortalServer::start({});
  ASSERT_TRUE(server.has_value());
  std::ofstream(dir / "ratchet.toml")
      << "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" RATCHET_PLUGIN_DIR "\"\n\n"
      << "[plugin.http_json]\nurl = \"" << (*server)->portal_url("imdb") << "/movies/{{args.name}}\"\n"
      << "extract = \"/rating\"\noutput = \"rating\"\n\n"
      << "[job.imdb_only]\nsteps = [{ name = \"imdb\", call = \"http_json.request\", "
         "args = { name = \"{{args.name}}\" } }]\n";
  auto engine = Engine::open_config(dir / "ratchet.toml");
  ASSERT_TRUE(engine.has_value()) << engine.error().to_string();
  auto id = (*engine)->enqueue("imdb_only", {{"name", "The Dark Knight"}});
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  ASSERT_TRUE((*engine)->start().has_value());
  ASSERT_TRUE((*engine)->drain(30s).has_value());
  (*engine)->stop();
  auto job = (*engine)->get(*id);
  ASSERT_TRUE(job.has_value());
  ASSERT_EQ(job->state, JobState::kCompleted) << job->last_error;
  EXPECT_DOUBLE_EQ(job->steps.at(0).output["rating"].get<double>(),
                   mock_portal::expected_rating("imdb", "The Dark Knight"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ratchet
