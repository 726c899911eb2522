// Reloading the running configuration from its file.
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "config/source.hpp"
#include "load_helpers.hpp"

namespace ratchet::config {
namespace {

using namespace std::chrono_literals;

class ConfigSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ratchet_config_source_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    file_ = dir_ / "r.toml";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(std::string_view text) {
    std::ofstream out(file_, std::ios::trunc);
    out << text;
  }

  std::filesystem::path dir_;
  std::filesystem::path file_;
};

constexpr std::string_view kV1 = R"([plugin.imdb]
api_key = "${KEY}"
[[plugin.imdb.limit]]
rate = 10
per = "1s"
[job.j]
steps = [{ name = "s", call = "imdb.get_rating" }]
)";

TEST_F(ConfigSourceTest, Reload_ValidChange_SwapsAndSaysWhatChanged) {
  write(kV1);
  auto source = ConfigSource::open(file_, testing::fixed_env({{"KEY", "k"}}));
  ASSERT_TRUE(source.has_value()) << to_string(source.error());
  ConfigPtr before = (*source)->current();
  EXPECT_EQ(before->plugins.at("imdb").policy.limits[0].rate, 10);

  write(R"([engine]
workers = 4
[plugin.imdb]
api_key = "${KEY}"
[[plugin.imdb.limit]]
rate = 20
per = "1s"
[plugin.rt]
[job.j]
steps = [{ name = "s", call = "imdb.get_rating" }]
[job.k]
steps = [{ name = "s", call = "rt.get_rating" }]
)");
  auto changes = (*source)->reload();
  ASSERT_TRUE(changes.has_value()) << to_string(changes.error());
  EXPECT_EQ(*changes,
            "engine settings changed (workers take effect after a restart)\n"
            "plugin imdb changed\n"
            "plugin rt added\n"
            "job type k added");
  EXPECT_EQ((*source)->current()->plugins.at("imdb").policy.limits[0].rate, 20);
  // A holder of the old pointer keeps a consistent old config.
  EXPECT_EQ(before->plugins.at("imdb").policy.limits[0].rate, 10);
}

// A reload that dropped a job type (and its plugin's table) let the engine
// claim that type's parked jobs and run their steps without the plugin's
// settings: every call failed, and the jobs died of the reload. Removing a
// type takes a restart; the running config stays.
TEST_F(ConfigSourceTest, Reload_JobTypeRemoved_RefusedNamingItAndTheRunningConfigStays) {
  write(kV1);
  auto source = ConfigSource::open(file_, testing::fixed_env({{"KEY", "k"}}));
  ASSERT_TRUE(source.has_value()) << to_string(source.error());
  write("[engine]\nworkers = 2\n");
  auto changes = (*source)->reload();
  ASSERT_FALSE(changes.has_value());
  ASSERT_EQ(changes.error().size(), 1u);
  EXPECT_EQ(changes.error()[0].where.key_path, "job.j");
  EXPECT_NE(changes.error()[0].message.find("removing a job type takes a restart"), std::string::npos)
      << changes.error()[0].message;
  EXPECT_TRUE((*source)->current()->jobs.contains("j"));
  EXPECT_TRUE((*source)->current()->plugins.contains("imdb"));
}

TEST_F(ConfigSourceTest, Reload_SameFile_SaysNoChanges) {
  write(kV1);
  auto source = ConfigSource::open(file_, testing::fixed_env({{"KEY", "k"}}));
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ((*source)->reload().value(), "no changes");
}

TEST_F(ConfigSourceTest, Reload_InvalidFile_KeepsTheRunningConfigAndReportsAllErrors) {
  write(kV1);
  auto source = ConfigSource::open(file_, testing::fixed_env({{"KEY", "k"}}));
  ASSERT_TRUE(source.has_value());
  ConfigPtr before = (*source)->current();
  write("[engine]\nworkers = 0\n[[plugin.imdb.limit]]\nrate = 0\nper = \"1s\"\n");
  auto result = (*source)->reload();
  ASSERT_FALSE(result.has_value());
  ASSERT_EQ(result.error().size(), 2u) << to_string(result.error());
  EXPECT_EQ(result.error()[0].where.line, 2);
  EXPECT_EQ(result.error()[1].where.line, 4);
  EXPECT_EQ((*source)->current(), before);
}

TEST_F(ConfigSourceTest, Reload_ChangedSecret_IsReportedWithoutItsValue) {
  write(kV1);
  std::string key = "old-secret";
  auto source =
      ConfigSource::open(file_, [&](std::string_view) -> std::optional<std::string> { return key; });
  ASSERT_TRUE(source.has_value());
  key = "new-secret";
  auto changes = (*source)->reload();
  ASSERT_TRUE(changes.has_value());
  EXPECT_EQ(*changes, "plugin imdb changed");
  EXPECT_EQ((*source)->current()->plugins.at("imdb").settings["api_key"], "new-secret");
}

TEST_F(ConfigSourceTest, Reload_ChangedEngineValueFromEnv_IsReportedWithoutItsValue) {
  write("[engine]\nlease = \"${LEASE}\"\n");
  std::string lease = "40s";
  auto source =
      ConfigSource::open(file_, [&](std::string_view) -> std::optional<std::string> { return lease; });
  ASSERT_TRUE(source.has_value());
  lease = "50s";
  auto changes = (*source)->reload();
  ASSERT_TRUE(changes.has_value());
  EXPECT_EQ(*changes, "engine settings changed");
  EXPECT_EQ((*source)->current()->engine.lease, 50s);
}

TEST_F(ConfigSourceTest, Open_InvalidFile_ReturnsDiagnostics) {
  write("[job.j]\n");
  auto source = ConfigSource::open(file_, testing::fixed_env({}));
  ASSERT_FALSE(source.has_value());
  EXPECT_EQ(source.error().size(), 1u);
}

TEST_F(ConfigSourceTest, Current_ReadDuringReloads_AlwaysSeesAWholeConfig) {
  write(kV1);
  auto source = ConfigSource::open(file_, testing::fixed_env({{"KEY", "k"}}));
  ASSERT_TRUE(source.has_value());
  std::atomic<bool> stop = false;
  std::thread reader([&] {
    while (!stop.load()) {
      ConfigPtr c = (*source)->current();
      ASSERT_TRUE(c);
      ASSERT_EQ(c->plugins.at("imdb").policy.limits.size(), 1u);
    }
  });
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*source)->reload().has_value());
  stop = true;
  reader.join();
}

}  // namespace
}  // namespace ratchet::config
