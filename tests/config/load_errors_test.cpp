// Each class of configuration error, with its exact place in the file.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "load_helpers.hpp"
#include "temp_dir.hpp"

namespace ratchet::config {
namespace {

using testing::errors;
using testing::load;

TEST(LoadErrors_TomlSyntax, ReportsFileLineColumn) {
  auto r = load("[engine]\nworkers = 4\nplugins = \n");
  ASSERT_FALSE(r.has_value());
  ASSERT_EQ(r.error().size(), 1u);
  EXPECT_EQ(r.error()[0].where.file, "t.toml");
  EXPECT_EQ(r.error()[0].where.line, 3);
  EXPECT_GT(r.error()[0].where.column, 0);
  EXPECT_NE(r.error()[0].message.find("TOML syntax error"), std::string::npos);
}

TEST(LoadErrors_UnknownKey, NamesKeyPositionAndSuggestion) {
  auto r = load("[engine]\nworkerz = 4\n");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:2:1: engine.workerz: ", "unknown key \"workerz\" in [engine] (did you mean \"workers\"?)");
}

TEST(LoadErrors_UnknownKeyInEveryReservedTable, IsReported) {
  auto r = load(R"([enigne]
[plugin.p]
free_setting = 1
[[plugin.p.limit]]
rate = 1
per = "1s"
brust = 2
[plugin.p.retry]
attemps = 2
[plugin.p.circuit_breaker]
open_fr = "1s"
[plugin.p.operation.op]
timeout = "1s"
retyr = 3
[job.j]
atempts = 3
backoff = { kind = "linear", inital = "1s" }
args = { a = { type = "string", requird = false } }
steps = [{ name = "s", call = "p.op", args = { v = "{{args.a}}" }, aftr = [] }]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:1:2: enigne: ", "did you mean \"engine\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:7:1: plugin.p.limit[0].brust: ", "did you mean \"burst\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:9:1: plugin.p.retry.attemps: ", "did you mean \"attempts\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:11:1: plugin.p.circuit_breaker.open_fr: ", "did you mean \"open_for\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:14:1: plugin.p.operation.op.retyr: ", "did you mean \"retry\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:16:1: job.j.atempts: ", "did you mean \"attempts\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:17:30: job.j.backoff.inital: ", "did you mean \"initial\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:18:33: job.j.args.a.requird: ", "did you mean \"required\"?");
  EXPECT_DIAGNOSTIC(r, "t.toml:19:68: job.j.steps[0].aftr: ", "did you mean \"after\"?");
  EXPECT_EQ(errors(r).size(), 9u) << testing::joined(errors(r));
}

TEST(LoadErrors_PluginSettingCloseToAPolicyKey, IsTakenForATypo) {
  auto r = load(R"([plugin.p]
base_url = "http://x"
[plugin.p.retyr]
attempts = 2
[[plugin.p.limits]]
rate = 1
per = "1s"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:11: plugin.p.retyr: ", "(did you mean \"retry\"?)");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:12: plugin.p.limits: ", "(did you mean \"limit\"?)");
  EXPECT_EQ(errors(r).size(), 2u) << testing::joined(errors(r));
}

TEST(LoadErrors_FarFetchedKey, HasNoSuggestion) {
  auto r = load("[engine]\ncolour = \"red\"\n");
  ASSERT_EQ(errors(r).size(), 1u);
  EXPECT_EQ(errors(r)[0].find("did you mean"), std::string::npos) << errors(r)[0];
}

TEST(LoadErrors_WrongTypes, NameExpectedAndActual) {
  auto r = load(R"([engine]
workers = "eight"
lease = 30
[plugin.p]
concurrency = 2.5
limit = "10/s"
[plugin.p.circuit_breaker]
enabled = "yes"
[job.j]
steps = "s"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:11: engine.workers: ", "expected an integer, got a string");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:9: engine.lease: ", "a duration needs a unit");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:15: plugin.p.concurrency: ", "expected an integer, got a float");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:9: plugin.p.limit: ", "got a string");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:8:11: plugin.p.circuit_breaker.enabled: ", "expected true or false, got a string");
  EXPECT_DIAGNOSTIC(r, "t.toml:10:9: job.j.steps: ", "expected an array, got a string");
}

TEST(LoadErrors_OutOfRange, EachBoundIsChecked) {
  auto r = load(R"([engine]
workers = 1025
[plugin.p]
concurrency = 0
max_redirects = 51
[[plugin.p.limit]]
rate = 0
per = "0s"
burst = 0
[plugin.p.retry]
attempts = 0
multiplier = 0.5
statuses = [99]
[plugin.p.circuit_breaker]
failure_ratio = 1.5
[job.j]
attempts = 0
steps = [{ name = "s", call = "p.op" }]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:11: engine.workers: ", "must be between 1 and 1024, got 1025");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:15: plugin.p.concurrency: ", "must be between 1 and");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:17: plugin.p.max_redirects: ", "must be between 0 and 50, got 51");
  EXPECT_DIAGNOSTIC(r, "t.toml:7:8: plugin.p.limit[0].rate: ", "must be between 1 and 1000000000, got 0");
  EXPECT_DIAGNOSTIC(r, "t.toml:8:7: plugin.p.limit[0].per: ", "must be at least 1ms, got 0s");
  EXPECT_DIAGNOSTIC(r, "t.toml:9:9: plugin.p.limit[0].burst: ", "must be between 1 and 1000000000, got 0");
  EXPECT_DIAGNOSTIC(r, "t.toml:11:12: plugin.p.retry.attempts: ", "must be between 1 and 1000, got 0");
  EXPECT_DIAGNOSTIC(r, "t.toml:12:14: plugin.p.retry.multiplier: ", "must be between 1 and 100");
  EXPECT_DIAGNOSTIC(r, "t.toml:13:13: plugin.p.retry.statuses[0]: ", "must be between 100 and 599, got 99");
  EXPECT_DIAGNOSTIC(r, "t.toml:15:17: plugin.p.circuit_breaker.failure_ratio: ", "(0, 1]");
  EXPECT_DIAGNOSTIC(r, "t.toml:17:12: job.j.attempts: ", "must be between 1 and");
  EXPECT_EQ(errors(r).size(), 11u) << testing::joined(errors(r));
}

// A window shorter than a request's way to the server cannot be kept, and
// a count made before the request leaves is stale before it is sent: with
// `per = "1us"` every request was held back, and `ratchet run` spun a core
// for ever sending nothing.
TEST(LoadErrors_LimitPeriodUnderAMillisecond, IsRefusedSayingHowToWriteAFastLimit) {
  auto r = load(R"([plugin.p]
[[plugin.p.limit]]
rate = 1
per = "1us"
[[plugin.p.limit]]
rate = 10
per = "999us"
algorithm = "token_bucket"
burst = 2
[[plugin.p.operation.op.limit]]
rate = 1
per = "10us"
algorithm = "fixed_window"
[[plugin.p.limit]]
rate = 1
per = "1ms"
[job.j]
steps = [{ name = "s", call = "p.op" }]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:7: plugin.p.limit[0].per: ", "must be at least 1ms, got 1us");
  EXPECT_DIAGNOSTIC(r, "t.toml:7:7: plugin.p.limit[1].per: ", "must be at least 1ms, got 999us");
  EXPECT_DIAGNOSTIC(r, "t.toml:12:7: plugin.p.operation.op.limit[0].per: ", "rate = 1000, per = \"1s\"");
  EXPECT_EQ(errors(r).size(), 3u) << testing::joined(errors(r));
}

TEST(LoadErrors_DurationAboveItsMaximum, IsRefusedNamingTheBound) {
  auto r = load(R"([engine]
lease = "400d"
[plugin.p]
timeout = "100000d"
[plugin.p.retry]
deadline = "100000d"
[[plugin.p.limit]]
rate = 1
per = "366d"
[job.j]
timeout = "1000d"
steps = [{ name = "s", call = "p.op", max_wait = "365d1s" }]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: engine.lease: ", "must be at most 365d, got 400d");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:11: plugin.p.timeout: ", "must be at most 365d, got 100000d");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:12: plugin.p.retry.deadline: ", "must be at most 365d, got 100000d");
  EXPECT_DIAGNOSTIC(r, "t.toml:9:7: plugin.p.limit[0].per: ", "must be at most 365d, got 366d");
  EXPECT_DIAGNOSTIC(r, "t.toml:11:11: job.j.timeout: ", "must be at most 365d, got 1000d");
  EXPECT_DIAGNOSTIC(r, "t.toml:12:50: job.j.steps[0].max_wait: ", "must be at most 365d, got 365d1s");
  EXPECT_EQ(errors(r).size(), 6u) << testing::joined(errors(r));
  EXPECT_TRUE(load("[engine]\nlease = \"365d\"\n[plugin.p.retry]\ndeadline = \"365d\"\n").has_value());
}

TEST(LoadErrors_DurationAboveItsMaximumFromTheEnvironment, IsRefusedWithoutShowingTheValue) {
  auto r = load("[plugin.p]\ntimeout = \"${T}\"\n", {{"T", "100000d"}});
  EXPECT_DIAGNOSTIC(r, "t.toml:2:11: plugin.p.timeout: ", "must be at most 365d");
  EXPECT_EQ(testing::joined(errors(r)).find("100000d"), std::string::npos) << testing::joined(errors(r));
}

TEST(LoadErrors_TimeoutUnderAMillisecond, IsRefusedBecauseLibcurlWouldReadItAsNone) {
  auto r = load(R"([plugin.p]
timeout = "500us"
connect_timeout = "0.5ms"
[plugin.p.retry]
per_try_timeout = "999us"
deadline = "100us"
[plugin.p.operation.op]
timeout = "1us"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:11: plugin.p.timeout: ", "must be at least 1ms, got 500us");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:19: plugin.p.connect_timeout: ", "must be at least 1ms, got 0.5ms");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:19: plugin.p.retry.per_try_timeout: ", "must be at least 1ms, got 999us");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:12: plugin.p.retry.deadline: ", "must be at least 1ms, got 100us");
  EXPECT_DIAGNOSTIC(r, "t.toml:8:11: plugin.p.operation.op.timeout: ", "must be at least 1ms, got 1us");
  EXPECT_EQ(errors(r).size(), 5u) << testing::joined(errors(r));
  EXPECT_TRUE(
      load("[plugin.p]\ntimeout = \"1ms\"\n[plugin.p.retry]\nper_try_timeout = \"1ms\"\n").has_value());
}

TEST(LoadErrors_RateAndBurstAboveTheirMaximum, AreRefusedNamingTheBound) {
  auto r = load(R"([[plugin.p.limit]]
rate = 9223372036854775807
per = "1s"
[[plugin.p.limit]]
rate = 10
per = "1s"
burst = 9223372036854775807
[[plugin.p.limit]]
rate = 1000000001
per = "1d"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:8: plugin.p.limit[0].rate: ", "must be between 1 and 1000000000");
  EXPECT_DIAGNOSTIC(r, "t.toml:7:9: plugin.p.limit[1].burst: ", "must be between 1 and 1000000000");
  EXPECT_DIAGNOSTIC(r, "t.toml:9:8: plugin.p.limit[2].rate: ", "must be between 1 and 1000000000");
  EXPECT_EQ(errors(r).size(), 3u) << testing::joined(errors(r));
  EXPECT_TRUE(
      load("[[plugin.p.limit]]\nrate = 1000000000\nper = \"365d\"\nburst = 1000000000\n").has_value());
}

TEST(LoadErrors_BadChoice, SuggestsTheNearestWord) {
  auto r = load(R"([engine.sqlite]
synchronous = "fulll"
[[plugin.p.limit]]
rate = 1
per = "1s"
algorithm = "token-bucket"
scope = "global"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:15: engine.sqlite.synchronous: ",
                    "\"fulll\" is not one of \"normal\", \"full\" (did you mean \"full\"?)");
  EXPECT_DIAGNOSTIC(r, "t.toml:6:13: plugin.p.limit[0].algorithm: ", "did you mean \"token_bucket\"?");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:7:9: plugin.p.limit[0].scope: ", "\"global\" is not one of \"process\", \"database\"");
}

// A file written when the SQLite setting sat in [engine] is told where it went.
TEST(LoadErrors_BackendSettingInEngineTable, SaysWhichTableItBelongsTo) {
  auto r = load("[engine]\nsynchronous = \"full\"\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:15: engine.synchronous: ",
                    "a setting of the SQLite backend, read from its own table: write it as [engine.sqlite] "
                    "synchronous");
  EXPECT_EQ(errors(r).size(), 1u) << testing::joined(errors(r));
}

TEST(LoadErrors_BackendTables, UnknownKeysAndBadValuesNamed) {
  auto r = load(R"([engine.sqlite]
synchronus = "full"
[engine.postgres]
connect_timeout = "0s"
pool = 3
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:1: engine.sqlite.synchronus: ", "(did you mean \"synchronous\"?)");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:19: engine.postgres.connect_timeout: ", "");
  EXPECT_DIAGNOSTIC(r, "t.toml:5:1: engine.postgres.pool: ", "allowed keys: connect_timeout");
  EXPECT_EQ(errors(r).size(), 3u) << testing::joined(errors(r));
  EXPECT_DIAGNOSTIC(load("[engine]\nsqlite = 1\n"), "t.toml:2:10: engine.sqlite: ", "expected a table");
}

TEST(LoadErrors_MissingRequired, NamesTheKeyAtItsTable) {
  auto r = load("[[plugin.p.limit]]\nper = \"1s\"\n[job.j]\nattempts = 2\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:1:1: plugin.p.limit[0]: ", "\"rate\" is required");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:1: job.j: ", "\"steps\" is required");
}

TEST(LoadErrors_BadDuration, QuotesTheTextAndTheAccepted) {
  auto r = load("[engine]\nlease = \"30 seconds\"\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:9: engine.lease: ", "invalid duration \"30 seconds\"");
}

TEST(LoadErrors_CrossField, HeartbeatNotShorterThanLeaseAndBackoffInitialAboveMax) {
  auto r = load(R"([engine]
lease = "10s"
heartbeat = "10s"
[plugin.p.retry]
initial = "1m"
max = "1s"
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:13: engine.heartbeat: ", "shorter than lease");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:1: plugin.p.retry: ", "initial backoff is longer than max");
}

TEST(LoadErrors_WeightsOfAnUnkeyedLimitOrOutOfRange, AreRefusedNamingTheKey) {
  auto r = load("[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nweights = { gold = 3 }\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:11: plugin.p.limit[0].weights: ", "add key = ");
  auto big = load(
      "[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nkey = \"{{args.account}}\"\n"
      "weights = { gold = 0, silver = 5000 }\n");
  EXPECT_DIAGNOSTIC(big, "t.toml:5:20: plugin.p.limit[0].weights.gold: ", "between 1 and 1000, got 0");
  auto secret = load(
      "[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nkey = \"{{settings.api_key}}\"\nweights = { abc = 2 }\n");
  EXPECT_DIAGNOSTIC(secret,
                    "t.toml:5:11: plugin.p.limit[0].weights: ", "a key read from the settings is a secret");
  EXPECT_DIAGNOSTIC(big, "t.toml:5:32: plugin.p.limit[0].weights.silver: ", "between 1 and 1000, got 5000");
}

TEST(LoadErrors_BurstWithAWindowAlgorithm, IsRefused) {
  auto r = load("[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nburst = 2\nalgorithm = \"fixed_window\"\n");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:5:13: plugin.p.limit[0].algorithm: ", "burst applies only to algorithm = \"token_bucket\"");
}

TEST(LoadErrors_LimitKey, APlaceholderOtherThanAnArgumentOrASettingIsRefused) {
  auto r = load("[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nkey = \"{{steps.a.output.x}}\"\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:7: plugin.p.limit[0].key: ",
                    "it must name a job argument or a plugin setting (a limit's key reads {{args.NAME}}");
}

TEST(LoadErrors_LimitKey, AKeyWithoutAPlaceholderIsRefused) {
  auto r = load("[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nkey = \"account\"\n");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:7: plugin.p.limit[0].key: ", "a key holds at least one placeholder");
}

TEST(LoadErrors_LimitKey, ASettingThePluginDoesNotHaveIsRefused) {
  auto r = load(
      "[plugin.p]\napi_key = \"k\"\n[[plugin.p.operation.q.limit]]\nrate = 5\nper = \"1s\"\n"
      "key = \"{{settings.api_kye}}\"\n");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:3:1: plugin.p.operation.q.limit[0].key: ",
      "plugin p has no setting api_kye (add it to [plugin.p], or key the limit by a job argument)");
}

TEST(LoadErrors_LimitKey, AKeyFromTheEnvironmentIsRefusedWithoutShowingIt) {
  auto r =
      load("[[plugin.p.limit]]\nrate = 5\nper = \"1s\"\nkey = \"${KEY}\"\n", {{"KEY", "{{args.sekrit}}"}});
  EXPECT_DIAGNOSTIC(r, "t.toml:4:7: plugin.p.limit[0].key: ", "write the key literally");
  for (const auto& line : testing::errors(r)) EXPECT_EQ(line.find("sekrit"), std::string::npos) << line;
}

// Keyed by an optional argument, a job enqueued without it failed every
// attempt on the missing key, to the last.
TEST(LoadErrors_LimitKey, AKeyArgumentDeclaredOptionalIsRefused) {
  auto r = load(R"([[plugin.p.limit]]
rate = 5
per = "1s"
key = "{{args.user}}"
[job.j]
args = { name = "string", user = "any?" }
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
[job.k]
args = { name = "string", user = { type = "string", required = false } }
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
[job.ok]
args = { name = "string", user = "any" }
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:7:", "argument \"user\" of [job.j] is optional; make it required");
  EXPECT_DIAGNOSTIC(r, "t.toml:10:", "argument \"user\" of [job.k] is optional; make it required");
  EXPECT_EQ(errors(r).size(), 2u) << testing::joined(errors(r));
}

// A misspelt name left the argument it meant shown everywhere.
TEST(LoadErrors_Redact, ANameThatIsNoDeclaredArgumentIsRefusedWithTheNearest) {
  auto r = load(R"([job.j]
args = { name = "string", email = "string" }
redact = ["emial", "name"]
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:3:11: job.j.redact[0]: ",
      "\"emial\" is not an argument of this job, so nothing would be redacted (did you mean \"email\"?)");
  EXPECT_EQ(errors(r).size(), 1u) << testing::joined(errors(r));
}

TEST(LoadErrors_LimitKey, AJobThatDeclaresItsArgumentsMustDeclareTheKeyArgument) {
  auto r = load(R"([[plugin.p.limit]]
rate = 5
per = "1s"
key = "{{args.account}}"
[job.j]
args = { name = "string" }
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:7:", "is keyed by {{args.account}}; declare argument \"account\" in [job.j] args");
  // Inferred arguments gain it.
  auto inferred = load(R"([[plugin.p.limit]]
rate = 5
per = "1s"
key = "{{args.account}}"
[job.j]
steps = [{ name = "s", call = "p.get", args = { n = "{{args.name}}" } }]
)");
  ASSERT_TRUE(inferred) << testing::joined(errors(inferred));
  std::vector<std::string> names;
  for (const auto& a : (*inferred)->jobs.at("j").args) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"name", "account"}));
}

TEST(LoadErrors_SeveralAtOnce, AllAreReportedInFileOrder) {
  auto r = load(R"([engine]
workers = 0
lease = "soon"
[plugin.p]
timeout = 5
[job.j]
priority = "high"
steps = [{ name = "s", call = "nodot" }]
)");
  auto e = errors(r);
  ASSERT_EQ(e.size(), 5u) << testing::joined(e);
  EXPECT_EQ(e[0].rfind("t.toml:2:", 0), 0u);
  EXPECT_EQ(e[1].rfind("t.toml:3:", 0), 0u);
  EXPECT_EQ(e[2].rfind("t.toml:5:", 0), 0u);
  EXPECT_EQ(e[3].rfind("t.toml:7:", 0), 0u);
  EXPECT_EQ(e[4].rfind("t.toml:8:", 0), 0u);
}

TEST(LoadErrors_UnreadableFile, NamesTheFile) {
  auto r = load_file("/nonexistent/ratchet.toml", testing::fixed_env({}));
  ASSERT_FALSE(r.has_value());
  ASSERT_EQ(r.error().size(), 1u);
  EXPECT_EQ(r.error()[0].where.file, "/nonexistent/ratchet.toml");
  EXPECT_NE(r.error()[0].message.find("cannot read"), std::string::npos);
}

// A dotted key nests one table per dot, with no bound in TOML: 30,000 parts
// (a 60 KB file) overflowed the stack while the config was read, and
// 200,000 inside the TOML parser itself. Either is an error at the key.
TEST(LoadErrors_KeyOfThousandsOfDottedParts, IsRefusedAtItsPlaceNotACrash) {
  for (int parts : {30'000, 200'000}) {
    std::string deep = "deep";
    for (int i = 0; i < parts; ++i) deep += ".a";
    const std::pair<std::string, std::string> cases[] = {
        {"[plugin.p]\nx = 1\n" + deep + " = 1\n", "t.toml:3:1: "},
        {"[plugin.p." + deep + "]\nx = 1\n", "t.toml:1:2: "}};
    for (const auto& [text, where] : cases) {
      auto r = load(text);
      auto e = errors(r);
      ASSERT_EQ(e.size(), 1u) << parts;
      EXPECT_EQ(e[0].rfind(where, 0), 0u) << e[0].substr(0, 200);
      EXPECT_NE(e[0].find("dotted parts nests deeper than any setting"), std::string::npos);
    }
  }
}

// Short keys, each within the bound, still nest as deep as their sum.
TEST(LoadErrors_ValueNestedDeeperThanAnySetting, IsRefusedAfterParsing) {
  std::string forty = "k";
  for (int i = 0; i < 40; ++i) forty += ".k";
  auto r = load("[plugin.p." + forty + "]\n" + forty + " = 1\n");
  auto e = errors(r);
  ASSERT_EQ(e.size(), 1u) << testing::joined(e);
  EXPECT_EQ(e[0].rfind("t.toml:", 0), 0u);
  EXPECT_NE(e[0].find("nested more than 64 tables or arrays deep"), std::string::npos) << e[0];
  // Dots inside a string value are no key: a long dotted value is read.
  std::string dotted = "x";
  for (int i = 0; i < 100; ++i) dotted += ".x";
  auto ok =
      load("[plugin.p]\nhost = \"" + dotted + "\"\n[job.j]\nsteps = [{ name = \"s\", call = \"p.op\" }]\n");
  EXPECT_TRUE(ok.has_value()) << testing::joined(errors(ok));
}

// A device or a runaway file is refused before it fills the memory.
TEST(LoadErrors_FileLargerThanAnyConfig, IsRefusedWithItsName) {
  ratchet::testing::TempDir dir;
  const auto big = dir.path() / "big.toml";
  {
    std::ofstream out(big);
    const std::string line = "# " + std::string(1022, 'x') + "\n";
    for (int i = 0; i < 4 * 1024 + 1; ++i) out << line;
  }
  for (const std::filesystem::path& p : {big, std::filesystem::path("/dev/zero")}) {
    auto r = load_file(p, testing::fixed_env({}));
    ASSERT_FALSE(r.has_value());
    ASSERT_EQ(r.error().size(), 1u);
    EXPECT_EQ(r.error()[0].where.file, p.string());
    EXPECT_NE(r.error()[0].message.find("is larger than 4 MiB"), std::string::npos) << r.error()[0].message;
  }
}

TEST(LoadErrors_WebSection, ATokenWrittenInTheFileABadListenAndAMisspeltKeyAreRefused) {
  auto r = load(R"([web]
listen = "8077"
token = "a-token-anyone-who-reads-the-file-holds"
read_onyl = true
[job.j]
steps = [{ name = "s", call = "p.op" }]
[plugin.p]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:10: web.listen: ", "write HOST:PORT, e.g. \"127.0.0.1:8077\"");
  EXPECT_DIAGNOSTIC(r, "t.toml:3:9: web.token: ", "the dashboard's token must come from the environment");
  EXPECT_DIAGNOSTIC(r, "t.toml:4:1: web.read_onyl: ", "did you mean \"read_only\"?");
}

TEST(LoadErrors_JobRedact, TakesArgumentNamesOnly) {
  auto r = load(R"([job.j]
redact = ["email", 3, ""]
steps = [{ name = "s", call = "p.op" }]
[plugin.p]
)");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:20: job.j.redact[1]: ", "");
  EXPECT_DIAGNOSTIC(r, "t.toml:2:23: job.j.redact[2]: ", "name an argument of the job");
}

TEST(LoadWebSection, TheTokenFromTheEnvironmentIsASecretAndEveryValueIsRead) {
  auto r = load(R"([web]
listen = "0.0.0.0:9000"
token = "${DASH_TOKEN}"
read_only = true
)",
                {{"DASH_TOKEN", "0123456789abcdef0123"}});
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->web.listen, "0.0.0.0:9000");
  EXPECT_EQ((*r)->web.token, "0123456789abcdef0123");
  EXPECT_TRUE((*r)->web.read_only);
  EXPECT_TRUE((*r)->secret_values.contains("0123456789abcdef0123")) << "masked wherever the engine prints";
}

}  // namespace
}  // namespace ratchet::config
