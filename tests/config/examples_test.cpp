// The example files shipped in config/ load and declare what they promise.
#include <gtest/gtest.h>

#include <algorithm>

#include "config/summary.hpp"
#include "load_helpers.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::config {
namespace {

using namespace std::chrono_literals;

std::filesystem::path example(const char* name) {
  return std::filesystem::path(RATCHET_SOURCE_DIR) / "config" / name;
}

TEST(ExampleOscar, DeclaresFivePortalsWithDifferentLimitsAndOneConcurrentJob) {
  auto r = load_file(example("oscar.toml"), testing::fixed_env({}));
  ASSERT_TRUE(r.has_value()) << to_string(r.error());
  const Config& c = **r;
  ASSERT_EQ(c.plugins.size(), 5u);
  std::set<std::string> limits;
  for (const char* name : {"imdb", "rotten_tomatoes", "sify", "netflix", "amazon_prime"}) {
    ASSERT_TRUE(c.plugins.contains(name)) << name;
    const auto& p = c.plugins.at(name);
    EXPECT_EQ(p.settings["base_url"], std::string("http://127.0.0.1:8080/") + name);
    ASSERT_EQ(p.policy.limits.size(), 1u) << name;
    limits.insert(summarize_policy(p.policy).substr(0, summarize_policy(p.policy).find(';')));
  }
  EXPECT_EQ(limits.size(), 5u);
  const auto& job = c.jobs.at("rate_movie");
  ASSERT_EQ(job.steps.size(), 5u);
  for (const auto& s : job.steps) {
    EXPECT_TRUE(s.after.empty()) << s.name;
    EXPECT_EQ(s.operation, "get_rating");
    EXPECT_EQ(s.args, nlohmann::json({{"name", "{{args.name}}"}}));
  }
  ASSERT_EQ(job.args.size(), 1u);
  EXPECT_EQ(job.args[0].name, "name");
  EXPECT_EQ(c.engine.database, example("oscar.db").lexically_normal());
}

TEST(ExampleMinimal, LoadsWithDefaults) {
  auto r = load_file(example("minimal.toml"), testing::fixed_env({}));
  ASSERT_TRUE(r.has_value()) << to_string(r.error());
  EXPECT_EQ((*r)->plugins.size(), 1u);
  EXPECT_EQ((*r)->jobs.size(), 1u);
  EXPECT_EQ((*r)->engine.workers, 8);
}

TEST(ExampleReference, LoadsAndItsDocumentedDefaultsMatchTheSpec) {
  auto r = load_file(example("reference.toml"), testing::fixed_env({{"EXAMPLE_API_KEY", "k"}}));
  ASSERT_TRUE(r.has_value()) << to_string(r.error());
  const Config& c = **r;
  EngineSpec defaults;
  EXPECT_EQ(c.engine.workers, defaults.workers);
  EXPECT_EQ(c.engine.lease, defaults.lease);
  EXPECT_EQ(c.engine.heartbeat, defaults.heartbeat);
  EXPECT_EQ(c.engine.park_threshold, defaults.park_threshold);
  const auto& p = c.plugins.at("example");
  EXPECT_EQ(p.secret_paths, std::set<std::string>{"/api_key"});
  ASSERT_EQ(p.policy.limits.size(), 4u);
  const auto keyed = std::count_if(p.policy.limits.begin(), p.policy.limits.end(),
                                   [](const LimitSpec& l) { return l.key == "{{settings.api_key}}"; });
  EXPECT_EQ(keyed, 1);
  EXPECT_EQ(p.operations.at("search").retry.attempts, 2);
  EXPECT_EQ(c.jobs.at("example").steps.size(), 2u);
}

TEST(ExampleReference, RefusesAMissingSecret) {
  auto r = load_file(example("reference.toml"), testing::fixed_env({}));
  ASSERT_FALSE(r.has_value());
  ASSERT_EQ(r.error().size(), 1u);
  EXPECT_NE(r.error()[0].message.find("EXAMPLE_API_KEY"), std::string::npos);
}

}  // namespace
}  // namespace ratchet::config
