// The Prometheus text of `ratchet run --metrics`, rendered from stats made up
// here: exact values, histogram buckets and the series every plugin has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metrics.hpp"
#include "prometheus_text.hpp"

namespace ratchet::cli {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using cli_test::buckets_of;
using cli_test::parse_samples;
using cli_test::value_of;

DurationHistogram histogram(std::vector<Duration> bounds, std::vector<std::uint64_t> counts, Duration sum) {
  DurationHistogram h;
  h.bounds = std::move(bounds);
  h.counts = std::move(counts);
  h.sum = sum;
  for (auto c : h.counts) h.count += c;
  return h;
}

TEST(MetricsText, StepDurations_Observations_CumulativeBucketsSumAndCount) {
  PluginCallStats imdb;
  imdb.plugin = "imdb";
  imdb.calls = 4;
  imdb.step_durations = {{"get_rating", histogram({1s, 5s, 60s}, {2, 1, 0, 1}, 70500ms)}};
  MetricsInput input;
  input.calls = {imdb};

  const std::string text = render_metrics(input);
  EXPECT_THAT(text, HasSubstr("# TYPE ratchet_step_duration_seconds histogram\n"));
  // Labels in name order, and count and sum before the buckets, as the
  // serializer writes them; a scraper reads any order.
  EXPECT_THAT(text,
              HasSubstr("ratchet_step_duration_seconds_count{operation=\"get_rating\",plugin=\"imdb\"} 4\n"
                        "ratchet_step_duration_seconds_sum{operation=\"get_rating\",plugin=\"imdb\"} 70.5\n"
                        "ratchet_step_duration_seconds_bucket{operation=\"get_rating\",plugin=\"imdb\","
                        "le=\"1\"} 2\n"
                        "ratchet_step_duration_seconds_bucket{operation=\"get_rating\",plugin=\"imdb\","
                        "le=\"5\"} 3\n"
                        "ratchet_step_duration_seconds_bucket{operation=\"get_rating\",plugin=\"imdb\","
                        "le=\"60\"} 3\n"
                        "ratchet_step_duration_seconds_bucket{operation=\"get_rating\",plugin=\"imdb\","
                        "le=\"+Inf\"} 4\n"));
}

TEST(MetricsText, StepDurations_ManyOperations_BucketsNeverDecreaseAndEndAtCountWhichEqualsCalls) {
  // Each step made one call here, so the steps timed are the calls made.
  PluginCallStats imdb;
  imdb.plugin = "imdb";
  imdb.step_durations = {{"search", histogram({10ms, 1s, 1h}, {0, 7, 0, 2}, 2h)},
                         {"get_rating", histogram({10ms, 1s, 1h}, {5, 0, 3, 0}, 90s)}};
  imdb.calls = 17;
  PluginCallStats sify;
  sify.plugin = "sify";
  sify.step_durations = {{"get_rating", histogram({10ms, 1s, 1h}, {1, 1, 1, 1}, 3h)}};
  sify.calls = 4;
  MetricsInput input;
  input.calls = {sify, imdb};

  const auto all = parse_samples(render_metrics(input));
  int histograms = 0;
  for (const auto& count : all) {
    if (count.name != "ratchet_step_duration_seconds_count") continue;
    ++histograms;
    const std::string series = count.labels.at("plugin") + "." + count.labels.at("operation");
    const auto buckets = buckets_of(all, "ratchet_step_duration_seconds", count.labels);
    ASSERT_EQ(buckets.size(), 4u) << series;
    for (std::size_t i = 1; i < buckets.size(); ++i) {
      EXPECT_GE(buckets[i].value, buckets[i - 1].value) << series << " le=" << buckets[i].labels.at("le");
    }
    EXPECT_EQ(buckets.back().labels.at("le"), "+Inf") << series;
    EXPECT_EQ(buckets.back().value, count.value) << series;
  }
  EXPECT_EQ(histograms, 3);
  for (const char* plugin : {"imdb", "sify"}) {
    double counted = 0;
    for (const auto& s : all) {
      if (s.name == "ratchet_step_duration_seconds_count" && s.labels.at("plugin") == plugin)
        counted += s.value;
    }
    EXPECT_EQ(counted, value_of(all, "ratchet_plugin_calls_total", {{"plugin", plugin}})) << plugin;
  }
}

TEST(MetricsText, ParkedNowAndLimiterWait_PerPlugin_GaugeAndCounterInSeconds) {
  PluginCallStats imdb;
  imdb.plugin = "imdb";
  imdb.parks = 9;
  imdb.parked_now = 3;
  imdb.limiter_wait = 2500ms;
  MetricsInput input;
  input.calls = {imdb};

  const std::string text = render_metrics(input);
  EXPECT_THAT(text, HasSubstr("# TYPE ratchet_plugin_parked_steps gauge\n"
                              "ratchet_plugin_parked_steps{plugin=\"imdb\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ratchet_plugin_limiter_wait_seconds_total counter\n"
                              "ratchet_plugin_limiter_wait_seconds_total{plugin=\"imdb\"} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("ratchet_plugin_parks_total{plugin=\"imdb\"} 9\n"));
}

TEST(MetricsText, PluginWithoutCalls_ListedWithZerosInEverySeries) {
  MetricsInput input;
  input.jobs = std::vector<std::pair<JobState, std::int64_t>>{{JobState::kScheduled, 2}};
  input.plugins = {"sify"};

  const auto all = parse_samples(render_metrics(input));
  EXPECT_EQ(value_of(all, "ratchet_jobs", {{"state", "scheduled"}}), 2);
  for (const char* name : {"ratchet_plugin_calls_total", "ratchet_plugin_throttled_total",
                           "ratchet_plugin_retries_total", "ratchet_plugin_parks_total",
                           "ratchet_plugin_parked_steps", "ratchet_plugin_limiter_wait_seconds_total"}) {
    EXPECT_EQ(value_of(all, name, {{"plugin", "sify"}}), 0) << name;
  }
}

TEST(MetricsText, NoJobsReadAndNoPlugins_EveryFamilyStillHasItsHelpAndType) {
  const std::string text = render_metrics(MetricsInput{});
  for (const char* family :
       {"ratchet_jobs gauge", "ratchet_plugin_calls_total counter", "ratchet_plugin_throttled_total counter",
        "ratchet_plugin_retries_total counter", "ratchet_plugin_parks_total counter",
        "ratchet_plugin_parked_steps gauge", "ratchet_plugin_limiter_wait_seconds_total counter",
        "ratchet_step_duration_seconds histogram"}) {
    EXPECT_THAT(text, HasSubstr(std::string("\n# TYPE ") + family + "\n")) << family;
  }
  EXPECT_EQ(text.rfind("# HELP ratchet_jobs Jobs in the database by state.\n", 0), 0u) << text;
  EXPECT_TRUE(parse_samples(text).empty()) << text;
}

TEST(MetricsText, Series_InTheOrderOfTheirStatesAndSortedByPluginThenOperation) {
  PluginCallStats sify;
  sify.plugin = "sify";
  sify.step_durations = {{"search", histogram({1s}, {1, 0}, 1s)},
                         {"get_rating", histogram({1s}, {1, 0}, 1s)}};
  PluginCallStats imdb;
  imdb.plugin = "imdb";
  imdb.step_durations = {{"search", histogram({1s}, {1, 0}, 1s)}};
  MetricsInput input;
  input.jobs =
      std::vector<std::pair<JobState, std::int64_t>>{{JobState::kScheduled, 2}, {JobState::kDead, 1}};
  input.calls = {sify, imdb};
  input.plugins = {"netflix"};

  std::vector<std::string> jobs, calls, durations;
  for (const auto& s : parse_samples(render_metrics(input))) {
    if (s.name == "ratchet_jobs") jobs.push_back(s.labels.at("state"));
    if (s.name == "ratchet_plugin_calls_total") calls.push_back(s.labels.at("plugin"));
    if (s.name == "ratchet_step_duration_seconds_count")
      durations.push_back(s.labels.at("plugin") + "." + s.labels.at("operation"));
  }
  EXPECT_EQ(jobs, (std::vector<std::string>{"scheduled", "dead"}));
  EXPECT_EQ(calls, (std::vector<std::string>{"imdb", "netflix", "sify"}));
  EXPECT_EQ(durations, (std::vector<std::string>{"imdb.search", "sify.get_rating", "sify.search"}));
}

TEST(MetricsText, LabelValueWithQuoteAndBackslash_IsEscaped) {
  PluginCallStats odd;
  odd.plugin = "a\"b\\c";
  MetricsInput input;
  input.calls = {odd};
  EXPECT_THAT(render_metrics(input), HasSubstr("ratchet_plugin_calls_total{plugin=\"a\\\"b\\\\c\"} 0\n"));
}

}  // namespace
}  // namespace ratchet::cli
