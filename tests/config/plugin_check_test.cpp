// A config against the plugins a folder provides: what opening an engine and
// `ratchet config check` both refuse, each at its place in the file.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

#include "config/plugin_check.hpp"
#include "load_helpers.hpp"

namespace ratchet::config {
namespace {

using testing::load;

const std::vector<ProvidedPlugin> kImdb = {{"imdb", "1.0.0", {"get_rating", "search"}}};

std::vector<std::string> lines(const std::vector<Diagnostic>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.to_string());
  return out;
}

TEST(PluginCheck_EveryCallProvided, HasNoProblem) {
  auto r = load("[plugin.imdb]\n[job.j]\nsteps = [{ name = \"a\", call = \"imdb.get_rating\" }]\n");
  ASSERT_TRUE(r.has_value()) << testing::joined(testing::errors(r));
  EXPECT_TRUE(check_plugin_calls(**r, kImdb, "plugins").empty());
}

TEST(PluginCheck_StepCallsAnUnconfiguredPluginThatIsProvided, HasNoProblem) {
  auto r = load("[job.j]\nsteps = [{ name = \"a\", call = \"imdb.search\" }]\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(check_plugin_calls(**r, kImdb, "plugins").empty()) << "it runs with the default policy";
}

TEST(PluginCheck_StepCallsAPluginNobodyProvides, NamesTheStepAndTheMissingTable) {
  auto r = load("[job.j]\nsteps = [\n  { name = \"a\", call = \"ghost.fetch\" },\n]\n");
  ASSERT_TRUE(r.has_value());
  auto got = lines(check_plugin_calls(**r, kImdb, "plugins"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("t.toml:3:", 0), 0u) << got[0];
  EXPECT_NE(got[0].find("job.j.steps[0]"), std::string::npos) << got[0];
  EXPECT_NE(got[0].find("[plugin.ghost]"), std::string::npos) << got[0];
  EXPECT_NE(got[0].find("loaded: imdb"), std::string::npos) << got[0];
}

TEST(PluginCheck_StepCallsAnOperationThePluginLacks, SuggestsTheNearestAndListsThem) {
  auto r = load("[plugin.imdb]\n[job.j]\nsteps = [{ name = \"a\", call = \"imdb.get_ratin\" }]\n");
  ASSERT_TRUE(r.has_value());
  auto got = lines(check_plugin_calls(**r, kImdb, "plugins"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("t.toml:3:", 0), 0u) << got[0];
  EXPECT_NE(got[0].find("did you mean \"get_rating\""), std::string::npos) << got[0];
  EXPECT_NE(got[0].find("get_rating, search"), std::string::npos) << got[0];
}

// A misspelt operation's limit was accepted and kept nothing: the
// operation meant ran unlimited.
TEST(PluginCheck_OperationTableForAnOperationThePluginLacks, IsReportedAtItsLimitWithTheNearest) {
  auto r = load(R"([plugin.imdb]
[[plugin.imdb.operation.get_ratign.limit]]
rate = 1
per = "1s"
[plugin.imdb.operation.search]
timeout = "5s"
[job.j]
steps = [{ name = "a", call = "imdb.get_rating" }]
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(testing::errors(r));
  auto got = lines(check_plugin_calls(**r, kImdb, "plugins"));
  ASSERT_EQ(got.size(), 1u) << testing::joined(got);
  EXPECT_EQ(got[0].rfind("t.toml:2:", 0), 0u) << got[0];
  EXPECT_NE(got[0].find("plugin.imdb.operation.get_ratign: plugin imdb 1.0.0 has no operation \"get_ratign\" "
                        "(did you mean \"get_rating\"?) (it has: get_rating, search)"),
            std::string::npos)
      << got[0];
}

TEST(PluginCheck_ConfiguredPluginWithoutFile, IsReportedAtItsTable) {
  auto r = load("[engine]\nworkers = 2\n\n[plugin.ghost]\nbase_url = \"x\"\n");
  ASSERT_TRUE(r.has_value());
  auto got = lines(check_plugin_calls(**r, kImdb, "plugins"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("t.toml:4:", 0), 0u) << got[0];
  EXPECT_NE(got[0].find("plugin.ghost"), std::string::npos) << got[0];
}

TEST(LoadFile_Directory, IsRefusedSayingItIsADirectory) {
  auto dir =
      std::filesystem::temp_directory_path() / ("ratchet-config-dir-" + std::to_string(::getpid()) + ".toml");
  std::filesystem::create_directories(dir);
  auto r = load_file(dir, testing::fixed_env({}));
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(r.has_value()) << "a folder is no config file, not an empty valid one";
  ASSERT_EQ(r.error().size(), 1u);
  EXPECT_NE(r.error()[0].message.find("directory"), std::string::npos) << r.error()[0].message;
}

}  // namespace
}  // namespace ratchet::config
