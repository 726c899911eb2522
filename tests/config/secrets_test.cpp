// ${NAME} environment references: resolved, recorded, and never shown.
#include <gtest/gtest.h>

#include "config/env.hpp"
#include "config/summary.hpp"
#include "load_helpers.hpp"

namespace ratchet::config {
namespace {

using testing::errors;
using testing::load;

constexpr std::string_view kSecret = "s3cr3t-value-42";

TEST(LoadSecrets_EnvReference, IsResolvedAndItsPointerRecorded) {
  auto r = load(R"([plugin.p]
api_key = "${API_KEY}"
base_url = "http://${HOST}/v1"
plain = "no env here"
auth = { token = "${API_KEY}" }
hosts = ["a", "${HOST}"]
[job.j]
steps = [{ name = "s", call = "p.op", args = { key = "${API_KEY}", name = "{{args.name}}" } }]
)",
                {{"API_KEY", std::string(kSecret)}, {"HOST", "example.test"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& p = (*r)->plugins.at("p");
  EXPECT_EQ(p.settings["api_key"], kSecret);
  EXPECT_EQ(p.settings["base_url"], "http://example.test/v1");
  EXPECT_EQ(p.settings["auth"]["token"], kSecret);
  EXPECT_EQ(p.secret_paths, (std::set<std::string>{"/api_key", "/auth/token", "/base_url", "/hosts/1"}));
  const auto& step = (*r)->jobs.at("j").steps[0];
  EXPECT_EQ(step.args["key"], kSecret);
  EXPECT_EQ(step.secret_paths, std::set<std::string>{"/key"});
}

TEST(LoadSecrets_Summary, MasksEverySecret) {
  auto r = load(R"([engine]
database = "${DB_DIR}/r.db"
[plugin.p]
api_key = "${API_KEY}"
[job.j]
steps = [{ name = "s", call = "p.op", args = { key = "${API_KEY}" } }]
)",
                {{"API_KEY", std::string(kSecret)}, {"DB_DIR", "/very/private"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  std::string s = summarize(**r);
  EXPECT_EQ(s.rfind("t.toml: 1 plugin, 1 job type\nengine: database ***,", 0), 0u) << s;
  EXPECT_EQ(s.find(kSecret), std::string::npos) << s;
  EXPECT_EQ(s.find("/very/private"), std::string::npos) << s;
  EXPECT_NE(s.find("\"api_key\":\"***\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"key\":\"***\""), std::string::npos) << s;
  EXPECT_NE(s.find("database ***"), std::string::npos) << s;
  EXPECT_EQ((*r)->engine.database, std::filesystem::path("/very/private/r.db"));
}

TEST(LoadSecrets_MissingVariable, IsAnErrorNamingIt) {
  auto r = load("[plugin.p]\napi_key = \"${IMDB_API_KEY}\"\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:11: plugin.p.api_key: ", "environment variable IMDB_API_KEY is not set");
}

TEST(LoadSecrets_BadValueFromEnv, IsReportedWithoutTheValue) {
  auto r =
      load(R"([engine]
lease = "${LEASE}"
synchronous = "${SYNC}"
[job.j]
steps = [{ name = "s", call = "${CALL}" }]
)",
           {{"LEASE", std::string(kSecret)}, {"SYNC", std::string(kSecret)}, {"CALL", std::string(kSecret)}});
  auto e = errors(r);
  ASSERT_EQ(e.size(), 3u) << testing::joined(e);
  for (const auto& line : e) EXPECT_EQ(line.find(kSecret), std::string::npos) << line;
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: engine.lease: ", "the value from the environment is not a duration");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:15: engine.synchronous: ", "the value from the environment is not one of");
}

TEST(LoadSecrets_ValueFromEnv, IsUsedByReservedKeys) {
  auto r = load("[engine]\nworkers = 2\nlease = \"${LEASE}\"\n", {{"LEASE", "45s"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->engine.lease, std::chrono::seconds(45));
  EXPECT_TRUE((*r)->env_keys.contains("engine.lease"));
}

TEST(ExpandEnv_Syntax, EscapesAndRefusesMalformedReferences) {
  auto env = testing::fixed_env({{"A", "1"}});
  EXPECT_EQ(expand_env("x$${A}y", env).value, "x${A}y");
  EXPECT_FALSE(expand_env("x$${A}y", env).used_env);
  EXPECT_EQ(expand_env("$A and ${A}$", env).value, "$A and 1$");
  EXPECT_TRUE(expand_env("${A", env).error);
  EXPECT_TRUE(expand_env("${1A}", env).error);
  EXPECT_TRUE(expand_env("${}", env).error);
  auto missing = expand_env("${B}${C}", env);
  EXPECT_EQ(missing.missing, (std::vector<std::string>{"B", "C"}));
}

}  // namespace
}  // namespace ratchet::config
