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

TEST(LoadSecrets_EnvReferenceInsideALongerString, ItsValueIsRecordedAsASecret) {
  auto r = load(R"([engine]
database = "${DB_DIR}/r.db"
[plugin.p]
url = "http://api.test/movies/{{args.name}}?api_key=${API_KEY}&v=1"
headers = { Authorization = "Bearer ${TOKEN}" }
[job.j]
steps = [{ name = "s", call = "p.op", args = { sig = "x-${SIG}-y" } }]
)",
                {{"API_KEY", std::string(kSecret)},
                 {"TOKEN", "tok-123456"},
                 {"SIG", "sig-abcdef"},
                 {"DB_DIR", "/very/private"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->secret_values,
            (std::set<std::string>{std::string(kSecret), "tok-123456", "sig-abcdef", "/very/private"}));
  EXPECT_EQ((*r)->plugins.at("p").secret_paths, (std::set<std::string>{"/url", "/headers/Authorization"}));
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
[engine.sqlite]
synchronous = "${SYNC}"
[job.j]
steps = [{ name = "s", call = "${CALL}" }]
)",
           {{"LEASE", std::string(kSecret)}, {"SYNC", std::string(kSecret)}, {"CALL", std::string(kSecret)}});
  auto e = errors(r);
  ASSERT_EQ(e.size(), 3u) << testing::joined(e);
  for (const auto& line : e) EXPECT_EQ(line.find(kSecret), std::string::npos) << line;
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: engine.lease: ", "the value from the environment is not a duration");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:4:15: engine.sqlite.synchronous: ", "the value from the environment is not one of");
}

TEST(LoadSecrets_ValueFromEnv, IsUsedByReservedKeys) {
  auto r = load("[engine]\nworkers = 2\nlease = \"${LEASE}\"\n", {{"LEASE", "45s"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->engine.lease, std::chrono::seconds(45));
  EXPECT_TRUE((*r)->env_keys.contains("engine.lease"));
}

TEST(LoadSecrets_PolicyValuesFromEnv, AreMaskedInTheSummary) {
  auto r = load(R"([engine]
lease = "${LEASE}"
[plugin.p]
timeout = "${TIMEOUT}"
[plugin.p.retry]
backoff = "${BACKOFF}"
[plugin.p.operation.op]
max_wait = "1m"
[job.j]
timeout = "${TIMEOUT}"
steps = [{ name = "s", call = "p.op", max_wait = "${TIMEOUT}" }]
)",
                {{"LEASE", "47s"}, {"TIMEOUT", "13s"}, {"BACKOFF", "decorrelated"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->engine.lease, std::chrono::seconds(47));
  std::string s = summarize(**r);
  for (const char* value : {"47s", "13s", "decorrelated"}) EXPECT_EQ(s.find(value), std::string::npos) << s;
  EXPECT_NE(s.find("lease ***"), std::string::npos) << s;
  EXPECT_NE(s.find("attempts ***"), std::string::npos) << s;  // the backoff text
  EXPECT_NE(s.find("max_wait 1m"), std::string::npos) << s;   // the operation's own, not from env
}

TEST(LoadSecrets_NamesFromEnv, AreRefused) {
  auto r = load(R"([job.j]
queue = "${Q}"
args = { a = "${T}" }
steps = [
  { name = "${N}", call = "p.op" },
  { name = "t", call = "${C}", after = ["${N}"], args = { v = "{{args.a}}" } },
]
)",
                {{"Q", "q"}, {"T", "string"}, {"N", "n"}, {"C", "p.op"}});
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: job.j.queue: ", "write this value literally");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:14: job.j.args.a: ", "write this value literally");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:12: job.j.steps[0].name: ", "write this value literally");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:24: job.j.steps[1].call: ", "write this value literally");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:41: job.j.steps[1].after[0]: ", "write this value literally");
  EXPECT_EQ(errors(r).size(), 5u) << testing::joined(errors(r));
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
