// What a valid file turns into: defaults, durations, paths, limits and the
// per-operation merge that policy_for returns.
#include <gtest/gtest.h>

#include "load_helpers.hpp"

namespace ratchet::config {
namespace {

using namespace std::chrono_literals;
using testing::errors;
using testing::load;

TEST(LoadValues_EmptyFile, GivesTheDocumentedDefaults) {
  auto r = load("");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& e = (*r)->engine;
  EXPECT_EQ(e.database, std::filesystem::path("ratchet.db"));
  EXPECT_EQ(e.plugins, std::filesystem::path("plugins"));
  EXPECT_EQ(e.workers, 8);
  EXPECT_FALSE(e.sqlite_synchronous_full);
  EXPECT_EQ(e.postgres_connect_timeout, 10s);
  EXPECT_EQ(e.busy_timeout, 5s);
  EXPECT_EQ(e.lease, 30s);
  EXPECT_EQ(e.heartbeat, 10s);
  EXPECT_EQ(e.park_threshold, 50ms);
  EXPECT_EQ(e.poll_interval, 200ms);
  EXPECT_EQ(e.shutdown_grace, 10s);
  EXPECT_EQ(e.max_lease_expiries, 3);
  EXPECT_TRUE((*r)->plugins.empty());
  EXPECT_TRUE((*r)->jobs.empty());
}

TEST(LoadValues_PluginAndJobWithoutPolicy, TakeDefaults) {
  auto r = load("[plugin.p]\nurl = \"u\"\n[job.j]\nsteps = [{ name = \"s\", call = \"p.op\" }]\n");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& p = (*r)->plugins.at("p");
  CallPolicy defaults;
  EXPECT_TRUE(p.policy.limits.empty());
  EXPECT_FALSE(p.policy.concurrency);
  EXPECT_EQ(p.policy.retry.attempts, defaults.retry.attempts);
  EXPECT_EQ(p.policy.retry.on, defaults.retry.on);
  EXPECT_EQ(p.policy.timeout, 30s);
  EXPECT_EQ(p.policy.max_wait, 24h);
  EXPECT_TRUE(p.policy.breaker.enabled);
  EXPECT_EQ(p.settings, nlohmann::json({{"url", "u"}}));
  const auto& j = (*r)->jobs.at("j");
  EXPECT_EQ(j.attempts, 20);
  EXPECT_EQ(j.backoff.initial, 1s);
  EXPECT_EQ(j.backoff.max, 1h);
  EXPECT_EQ(j.queue, "default");
  EXPECT_EQ(j.priority, 0);
  EXPECT_FALSE(j.timeout);
  EXPECT_TRUE(j.args.empty());
}

TEST(LoadValues_KeyedLimits, KeepTheirKeyTemplate) {
  auto r = load(R"([plugin.p]
api_key = "${P_KEY}"
[[plugin.p.limit]]
rate = 5
per = "1s"
key = "{{args.account}}"
[[plugin.p.limit]]
rate = 100
per = "1m"
key = "key {{settings.api_key}}"
scope = "database"
)",
                {{"P_KEY", "sk-1"}});
  ASSERT_TRUE(r) << testing::joined(errors(r));
  const auto& limits = (*r)->plugins.at("p").policy.limits;
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].key, "{{args.account}}");
  EXPECT_EQ(limits[1].key, "key {{settings.api_key}}");  // the template, never the secret
  EXPECT_EQ(limits[1].scope, LimitScope::kDatabase);
}

TEST(LoadValues_Durations, ReadEveryUnit) {
  auto r = load(R"([engine]
park_threshold = "250ms"
heartbeat = "10s"
lease = "5m"
shutdown_grace = "1h"
busy_timeout = "1h30m"
[plugin.p]
max_wait = "1d"
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->engine.park_threshold, 250ms);
  EXPECT_EQ((*r)->engine.heartbeat, 10s);
  EXPECT_EQ((*r)->engine.lease, 5min);
  EXPECT_EQ((*r)->engine.shutdown_grace, 1h);
  EXPECT_EQ((*r)->engine.busy_timeout, 90min);
  EXPECT_EQ((*r)->plugins.at("p").policy.max_wait, 24h);
}

TEST(LoadValues_BackendTables, EachBackendReadsItsOwn) {
  auto r = load(R"([engine.sqlite]
synchronous = "full"
[engine.postgres]
connect_timeout = "30s"
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_TRUE((*r)->engine.sqlite_synchronous_full);
  EXPECT_EQ((*r)->engine.postgres_connect_timeout, 30s);
}

TEST(LoadValues_RelativePaths, ResolveAgainstTheFileFolder) {
  auto r = load_string("[engine]\ndatabase = \"data/r.db\"\nplugins = \"/opt/plugins\"\n",
                       "/etc/ratchet/r.toml", testing::fixed_env({}));
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  EXPECT_EQ((*r)->engine.database, std::filesystem::path("/etc/ratchet/data/r.db"));
  EXPECT_EQ((*r)->engine.plugins, std::filesystem::path("/opt/plugins"));
  EXPECT_EQ((*r)->file, std::filesystem::path("/etc/ratchet/r.toml"));
}

TEST(LoadValues_Limits, DefaultAlgorithmDependsOnBurst) {
  auto r = load(R"([[plugin.p.limit]]
rate = 10
per = "1s"
[[plugin.p.limit]]
rate = 10
per = "1s"
burst = 5
[[plugin.p.limit]]
rate = 10000
per = "1d"
algorithm = "fixed_window"
scope = "database"
[[plugin.p.limit]]
rate = 2
per = "1s"
algorithm = "token_bucket"
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& l = (*r)->plugins.at("p").policy.limits;
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].algorithm, LimitAlgorithm::kSlidingWindow);
  EXPECT_EQ(l[0].rate, 10);
  EXPECT_EQ(l[0].per, 1s);
  EXPECT_FALSE(l[0].burst);
  EXPECT_EQ(l[0].scope, LimitScope::kProcess);
  EXPECT_EQ(l[1].algorithm, LimitAlgorithm::kTokenBucket);
  EXPECT_EQ(l[1].burst, 5);
  EXPECT_EQ(l[2].algorithm, LimitAlgorithm::kFixedWindow);
  EXPECT_EQ(l[2].scope, LimitScope::kDatabase);
  EXPECT_EQ(l[2].per, 24h);
  EXPECT_EQ(l[3].burst, 1);  // a token bucket without a declared burst allows none
  EXPECT_EQ(l[1].source.to_string(), "t.toml:4:1: plugin.p.limit[1]");
}

TEST(LoadValues_Retry, ReadsEveryField) {
  auto r = load(R"([plugin.p.retry]
attempts = 6
backoff = "decorrelated"
initial = "100ms"
max = "5s"
multiplier = 3
jitter = "equal"
per_try_timeout = "2s"
deadline = "1m"
on = ["throttled", "connect"]
statuses = [408, 409]
[plugin.p.circuit_breaker]
consecutive_failures = 7
failure_ratio = 0.25
min_calls = 20
window = "30s"
open_for = "10s"
half_open_probes = 2
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& p = (*r)->plugins.at("p").policy;
  EXPECT_EQ(p.retry.attempts, 6);
  EXPECT_EQ(p.retry.backoff.kind, Backoff::kDecorrelated);
  EXPECT_EQ(p.retry.backoff.initial, 100ms);
  EXPECT_EQ(p.retry.backoff.max, 5s);
  EXPECT_EQ(p.retry.backoff.multiplier, 3.0);
  EXPECT_EQ(p.retry.backoff.jitter, Jitter::kEqual);
  EXPECT_EQ(p.retry.per_try_timeout, 2s);
  EXPECT_EQ(p.retry.deadline, 1min);
  EXPECT_EQ(p.retry.on, (std::set<RetryOn>{RetryOn::kThrottled, RetryOn::kConnect}));
  EXPECT_EQ(p.retry.statuses, (std::set<int>{408, 409}));
  EXPECT_EQ(p.breaker.consecutive_failures, 7);
  EXPECT_EQ(p.breaker.failure_ratio, 0.25);
  EXPECT_EQ(p.breaker.min_calls, 20);
  EXPECT_EQ(p.breaker.window, 30s);
  EXPECT_EQ(p.breaker.open_for, 10s);
  EXPECT_EQ(p.breaker.half_open_probes, 2);
  EXPECT_FALSE((*load("[plugin.p]\ncircuit_breaker = false\n"))->plugins.at("p").policy.breaker.enabled);
}

TEST(LoadValues_JobBackoff, AcceptsFieldsOrATable) {
  auto fields = load(R"([job.j]
backoff = "linear"
initial = "2s"
max = "10m"
jitter = "none"
steps = [{ name = "s", call = "p.op" }]
)");
  ASSERT_TRUE(fields.has_value()) << testing::joined(errors(fields));
  const auto& a = (*fields)->jobs.at("j").backoff;
  EXPECT_EQ(a.kind, Backoff::kLinear);
  EXPECT_EQ(a.initial, 2s);
  EXPECT_EQ(a.max, 10min);
  EXPECT_EQ(a.jitter, Jitter::kNone);
  auto table = load(R"([job.j]
backoff = { kind = "constant", initial = "3s", max = "3s" }
timeout = "10m"
queue = "slow"
priority = -5
steps = [{ name = "s", call = "p.op" }]
)");
  ASSERT_TRUE(table.has_value()) << testing::joined(errors(table));
  const auto& j = (*table)->jobs.at("j");
  EXPECT_EQ(j.backoff.kind, Backoff::kConstant);
  EXPECT_EQ(j.backoff.initial, 3s);
  EXPECT_EQ(j.timeout, 10min);
  EXPECT_EQ(j.queue, "slow");
  EXPECT_EQ(j.priority, -5);
}

constexpr std::string_view kOverrides = R"([plugin.p]
timeout = "10s"
concurrency = 4
[[plugin.p.limit]]
rate = 10
per = "1s"
[plugin.p.retry]
attempts = 5
initial = "100ms"
[plugin.p.operation.search]
timeout = "1m"
[[plugin.p.operation.search.limit]]
rate = 1
per = "1s"
[plugin.p.operation.search.retry]
attempts = 2
[plugin.p.operation.detail]
max_redirects = 0
)";

TEST(LoadValues_OperationOverride, MergesFieldByField) {
  auto r = load(kOverrides);
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& p = (*r)->plugins.at("p");
  const auto& search = p.operations.at("search");
  EXPECT_EQ(search.timeout, 1min);                 // overridden
  EXPECT_EQ(search.concurrency, 4);                // inherited
  EXPECT_EQ(search.retry.attempts, 2);             // overridden inside the retry table
  EXPECT_EQ(search.retry.backoff.initial, 100ms);  // inherited inside the retry table
  ASSERT_EQ(search.limits.size(), 1u);             // only its own limits;
  EXPECT_EQ(search.limits[0].rate, 1);             // the plugin's stay in p.policy.limits
  const auto& detail = p.operations.at("detail");
  EXPECT_EQ(detail.max_redirects, 0);
  EXPECT_EQ(detail.timeout, 10s);
  EXPECT_TRUE(detail.limits.empty());
  EXPECT_EQ(detail.retry.attempts, 5);
}

TEST(ConfigPolicyFor, ReturnsOverrideThenPluginThenDefaults) {
  auto r = load(kOverrides);
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const Config& c = **r;
  EXPECT_EQ(&c.policy_for("p", "search"), &c.plugins.at("p").operations.at("search"));
  EXPECT_EQ(&c.policy_for("p", "other"), &c.plugins.at("p").policy);
  EXPECT_EQ(c.policy_for("p", "other").timeout, 10s);
  EXPECT_EQ(c.policy_for("unknown", "x").timeout, CallPolicy{}.timeout);
}

TEST(SourceRefToString, OmitsWhatIsUnknown) {
  EXPECT_EQ((SourceRef{"a.toml", 3, 7, "engine.workers"}.to_string()), "a.toml:3:7: engine.workers");
  EXPECT_EQ((SourceRef{"a.toml", 0, 0, ""}.to_string()), "a.toml");
  EXPECT_EQ((SourceRef{"", 2, 0, "job.x"}.to_string()), "<config>:2: job.x");
}

// Weighted calls: `cost` is how many units of the limits one call takes.
TEST(LoadValues_Cost, PluginDefaultAndOperationOverride) {
  auto r = load(R"([plugin.github]
cost = 2
host = "api.github.com"
[[plugin.github.limit]]
rate = 5000
per = "1h"
[plugin.github.operation.create_issue]
cost = 5
[plugin.github.operation.get_user]
timeout = "5s"
)");
  ASSERT_TRUE(r.has_value()) << testing::joined(errors(r));
  const auto& p = (*r)->plugins.at("github");
  EXPECT_EQ(p.policy.cost, 2);
  EXPECT_EQ(p.operations.at("create_issue").cost, 5);
  EXPECT_EQ(p.operations.at("get_user").cost, 2);      // inherited
  EXPECT_EQ(p.settings.at("host"), "api.github.com");  // "host" is a setting, not a typo of "cost"
}

TEST(LoadValues_Cost, AJobArgumentThatHoldsIt) {
  auto r = load(R"([plugin.shop]
cost = "{{args.points}}"
[[plugin.shop.limit]]
rate = 1000
per = "1s"
[plugin.bad]
cost = "{{settings.points}}"
[plugin.worse]
cost = "five"
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:7:8: plugin.bad.cost: ", "or one job argument that holds it, as \"{{args.points}}\"");
  EXPECT_DIAGNOSTIC(r, "t.toml:9:8: plugin.worse.cost: ", "\"five\" is neither");
  auto ok = load("[plugin.shop]\ncost = \"{{args.points}}\"\n");
  ASSERT_TRUE(ok.has_value()) << testing::joined(errors(ok));
  EXPECT_EQ((*ok)->plugins.at("shop").policy.cost_template, "{{args.points}}");
}

TEST(LoadErrors_Cost, MoreThanALimitCanEverHoldIsRefusedNamingBoth) {
  auto r = load(R"([plugin.p]
[[plugin.p.limit]]
rate = 10
per = "1s"
[plugin.p.operation.bulk]
cost = 12
[plugin.q]
[[plugin.q.limit]]
rate = 100
per = "1m"
burst = 4
algorithm = "token_bucket"
[plugin.q.operation.big]
cost = 5
[plugin.r]
cost = 0
)");
  EXPECT_DIAGNOSTIC(
      r, "t.toml:6:8: plugin.p.operation.bulk.cost: ",
      "cost = 12 is more than the limit at plugin.p.limit[0] (line 2) can ever hold (10 per window), "
      "so such a call could never start; lower the cost or raise the limit's rate");
  EXPECT_DIAGNOSTIC(r, "t.toml:14:8: plugin.q.operation.big.cost: ", "(a burst of 4)");
  EXPECT_DIAGNOSTIC(r, "t.toml:16:8: plugin.r.cost: ", "");
}

}  // namespace
}  // namespace ratchet::config
