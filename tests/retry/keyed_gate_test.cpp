// Keyed limits on a call gate: one budget per key of the call, stacked with
// the plugin's unkeyed limits; a throttled key never delays another key's
// calls; keys read from settings are named by a keyed hash, never by the
// secret itself.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "limit/key_identity.hpp"
#include "limit/micros.hpp"
#include "retry/call_gate.hpp"

namespace ratchet::retry {
namespace {

using namespace std::chrono_literals;
using Gate = CallGate;

config::LimitSpec limit(std::int64_t rate, config::microseconds per, std::optional<std::string> key = {}) {
  config::LimitSpec l;
  l.rate = rate;
  l.per = per;
  l.key = std::move(key);
  return l;
}

std::shared_ptr<Gate> gate_of(std::vector<config::LimitSpec> limits) {
  config::CallPolicy policy;
  policy.limits = std::move(limits);
  auto g = make_call_gate(policy, "portal/op");
  EXPECT_TRUE(g) << (g ? "" : g.error().to_string());
  return g ? *g : nullptr;
}

nlohmann::json account(const std::string& name) { return {{"account", name}, {"title", "Heat"}}; }

// Admits a bound step and says how long it must wait (zero: it went). The
// plugin's learned pace opens at a call per 8 ms: waits under kAtOnce are
// that pace, not a limit's window.
constexpr Duration kAtOnce = 20ms;
Duration wait_of(Gate& gate, CallState& step, TimePoint now) {
  auto a = gate.admit(step, now);
  if (auto* f = std::get_if<Gate::Fail>(&a)) {
    ADD_FAILURE() << f->error.to_string();
    return Duration::zero();
  }
  if (auto* w = std::get_if<Gate::Wait>(&a)) return w->until ? *w->until - now : Duration::max();
  auto& go = std::get<Gate::Go>(a);
  (void)gate.record(step, std::move(go.ticket), Outcome::ok(), {}, now);
  return Duration::zero();
}

TEST(KeyedGate, EachKeyHasItsOwnBudgetAndAThrottledKeyNeverDelaysAnother) {
  FakeClock clock;
  auto gate = gate_of({limit(1, 1s, "{{args.account}}")});
  CallState a1(clock.now()), a2(clock.now()), b1(clock.now());
  ASSERT_TRUE(gate->bind_keys(a1, account("alice"), {}));
  ASSERT_TRUE(gate->bind_keys(a2, account("alice"), {}));
  ASSERT_TRUE(gate->bind_keys(b1, account("bob"), {}));
  EXPECT_EQ(a1.keys(), std::vector<std::string>{"alice"});

  EXPECT_EQ(wait_of(*gate, a1, clock.now()), Duration::zero());
  EXPECT_GE(wait_of(*gate, a2, clock.now()), 1s);  // alice's second call waits for her window
  // Bob's call goes at once, however long alice's queue is.
  EXPECT_LT(wait_of(*gate, b1, clock.now()), kAtOnce);
}

TEST(KeyedGate, KeyedLimitsStackWithTheUnkeyedOnes) {
  FakeClock clock;
  // Two calls per account, three for the whole plugin, per second.
  auto gate = gate_of({limit(2, 1s, "{{args.account}}"), limit(3, 1s)});
  // Each goes when told (the learned pace's few milliseconds included).
  auto call = [&](const std::string& who) {
    CallState s(clock.now());
    EXPECT_TRUE(gate->bind_keys(s, account(who), {}));
    Duration wait = wait_of(*gate, s, clock.now());
    if (wait > Duration::zero() && wait < kAtOnce) {
      clock.advance(wait);
      wait = wait_of(*gate, s, clock.now());
    }
    return wait;
  };
  EXPECT_EQ(call("alice"), Duration::zero());
  EXPECT_EQ(call("alice"), Duration::zero());
  EXPECT_GT(call("alice"), 900ms);  // her own budget is spent
  EXPECT_EQ(call("bob"), Duration::zero());
  EXPECT_GT(call("carol"), 900ms);  // the plugin's budget is spent
}

TEST(KeyedGate, AJobWithoutTheKeyArgumentFailsNamingIt) {
  FakeClock clock;
  auto gate = gate_of({limit(1, 1s, "{{args.account}}")});
  CallState s(clock.now());
  auto st = gate->bind_keys(s, nlohmann::json{{"title", "Heat"}}, {});
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message().find("{{args.account}}"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("'account'"), std::string::npos) << st.error().message();
  // An admitted call without its keys is a caller bug, never a free pass.
  auto a = gate->admit(s, clock.now());
  EXPECT_TRUE(std::holds_alternative<Gate::Fail>(a));
}

TEST(KeyedGate, AKeyFromTheSettingsIsNamedByAKeyedHashNeverByTheSecret) {
  FakeClock clock;
  auto gate = gate_of({limit(1, 1s, "{{settings.api_key}}")});
  const nlohmann::json settings_a = {{"api_key", "sk-live-4242-secret"}};
  const nlohmann::json settings_b = {{"api_key", "sk-live-9999-secret"}};
  CallState a(clock.now()), a_again(clock.now()), b(clock.now());
  ASSERT_TRUE(gate->bind_keys(a, {}, settings_a));
  ASSERT_TRUE(gate->bind_keys(a_again, {}, settings_a));
  ASSERT_TRUE(gate->bind_keys(b, {}, settings_b));
  ASSERT_EQ(a.keys().size(), 1u);
  EXPECT_EQ(a.keys()[0].size(), 33u);
  EXPECT_EQ(a.keys()[0][0], '#');
  EXPECT_EQ(a.keys()[0].find("4242"), std::string::npos);
  EXPECT_EQ(a.keys(), a_again.keys());
  EXPECT_NE(a.keys(), b.keys());
  // One budget per API key.
  EXPECT_EQ(wait_of(*gate, a, clock.now()), Duration::zero());
  EXPECT_GE(wait_of(*gate, a_again, clock.now()), 1s);
  EXPECT_LT(wait_of(*gate, b, clock.now()), kAtOnce);
}

TEST(KeyedGate, EachKeyLearnsItsOwnPaceFromItsServer) {
  FakeClock clock;
  auto gate = gate_of({limit(10, 1s, "{{args.account}}")});
  // Alice's call is refused: her key pauses for the server's Retry-After.
  CallState a(clock.now());
  ASSERT_TRUE(gate->bind_keys(a, account("alice"), {}));
  auto admitted = gate->admit(a, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Go>(admitted));
  auto v = gate->record(a, std::move(std::get<Gate::Go>(admitted).ticket), Outcome::throttled(5s, "429"), {},
                        clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::RetryAt>(v));
  clock.advance(200ms);
  CallState a2(clock.now()), b(clock.now());
  ASSERT_TRUE(gate->bind_keys(a2, account("alice"), {}));
  ASSERT_TRUE(gate->bind_keys(b, account("bob"), {}));
  EXPECT_GE(wait_of(*gate, a2, clock.now()), 4s);               // alice's server said wait
  EXPECT_EQ(wait_of(*gate, b, clock.now()), Duration::zero());  // bob's did not
}

TEST(KeyIdentity, TheSameTextUnderAnotherSaltIsAnotherName) {
  EXPECT_NE(limit::key_identity("sk-1", true, "salt-a"), limit::key_identity("sk-1", true, "salt-b"));
  EXPECT_EQ(limit::key_identity("sk-1", true, "salt-a"), limit::key_identity("sk-1", true, "salt-a"));
  // Plain keys stay readable, unless long, odd, or shaped like a hash.
  EXPECT_EQ(limit::key_identity("alice", false, "s"), "alice");
  EXPECT_EQ(limit::key_identity(std::string(100, 'x'), false, "s")[0], '#');
  EXPECT_EQ(limit::key_identity("a\nb", false, "s")[0], '#');
  EXPECT_NE(limit::key_identity("#0123", false, "s"), "#0123");
}

TEST(KeyedGate, AStepWhoseKeyChangedGivesItsSlotBack) {
  FakeClock clock;
  auto gate = gate_of({limit(1, 1s, "{{args.account}}")});
  CallState first(clock.now()), second(clock.now());
  ASSERT_TRUE(gate->bind_keys(first, account("alice"), {}));
  ASSERT_TRUE(gate->bind_keys(second, account("alice"), {}));
  EXPECT_EQ(wait_of(*gate, first, clock.now()), Duration::zero());
  EXPECT_GE(wait_of(*gate, second, clock.now()), 1s);
  EXPECT_TRUE(second.holds_slot());
  ASSERT_TRUE(gate->bind_keys(second, account("bob"), {}));
  EXPECT_FALSE(second.holds_slot());
  EXPECT_LT(wait_of(*gate, second, clock.now()), kAtOnce);
}

TEST(KeyedGate, ALateRequestIsRecountedInItsKeysLimits) {
  FakeClock clock;
  auto gate = gate_of({limit(1, 1s, "{{args.account}}")});
  CallState s(clock.now());
  ASSERT_TRUE(gate->bind_keys(s, account("alice"), {}));
  auto a = gate->admit(s, clock.now());
  ASSERT_TRUE(std::holds_alternative<Gate::Go>(a));
  auto& go = std::get<Gate::Go>(a);
  clock.advance(300ms);  // connecting took long: counted anew now
  auto sent = gate->confirm_send(go.counted, clock.now());
  ASSERT_TRUE(sent) << sent.error().to_string();
  EXPECT_FALSE(*sent);
  EXPECT_EQ(go.counted.counted_at(), clock.now());
  // Alice's next call is spaced from the recounted start.
  CallState next(clock.now());
  ASSERT_TRUE(gate->bind_keys(next, account("alice"), {}));
  EXPECT_GE(wait_of(*gate, next, clock.now()), 1s);
}

}  // namespace
}  // namespace ratchet::retry

namespace ratchet::retry {
namespace {

// A backlog of one key: every step waits for its key's room once, and when
// that comes the shared limits have room too: it goes then.
TEST(KeyedGate, ABackloggedKeysStepsEachGoAtTheirKeysTime) {
  FakeClock clock;
  auto fixed = [](std::int64_t rate, std::optional<std::string> key) {
    config::LimitSpec l;
    l.algorithm = config::LimitAlgorithm::kFixedWindow;
    l.rate = rate;
    l.per = 1s;
    l.key = std::move(key);
    return l;
  };
  auto gate = gate_of({fixed(100, std::nullopt), fixed(4, "{{args.account}}")});
  clock.advance(std::chrono::ceil<std::chrono::seconds>(clock.now().time_since_epoch()) -
                clock.now().time_since_epoch());  // a whole second
  const TimePoint t0 = clock.now();
  std::vector<std::unique_ptr<CallState>> steps;
  std::vector<TimePoint> until;
  for (int i = 0; i < 40; ++i) {
    steps.push_back(std::make_unique<CallState>(clock.now()));
    ASSERT_TRUE(gate->bind_keys(*steps.back(), account("alice"), {}));
    const Duration w = wait_of(*gate, *steps.back(), clock.now());
    until.push_back(clock.now() + w);
  }
  // Each comes back at its time and goes then (or within the learned pace's opening steps).
  for (int i = 0; i < 40; ++i) {
    if (until[i] == t0) continue;  // went at once
    if (until[i] > clock.now()) clock.advance(until[i] - clock.now());
    Duration w = wait_of(*gate, *steps[i], clock.now());
    for (int tries = 0; w > Duration::zero() && w < 1s && tries < 5; ++tries) {
      clock.advance(w);
      w = wait_of(*gate, *steps[i], clock.now());
    }
    EXPECT_EQ(w, Duration::zero()) << "step " << i << " at +"
                                   << std::chrono::duration<double>(clock.now() - t0).count();
  }
  EXPECT_LT(clock.now() - t0, 10s + 100ms);
}

// A cost read from the job: each step's call takes its own job's units.
TEST(CostFromJob, EachStepTakesTheUnitsItsJobHolds) {
  config::CallPolicy policy;
  policy.limits = {limit(10, 1s)};
  policy.cost_template = "{{args.points}}";
  auto made = make_call_gate(policy, "portal/op");
  ASSERT_TRUE(made) << made.error().to_string();
  Gate& gate = **made;
  const TimePoint t0 = limit::from_micros(1'700'000'000'000'000);
  CallState seven(t0), three(t0), one(t0);
  ASSERT_TRUE(gate.bind_keys(seven, {{"points", 7}}, {}).has_value());
  ASSERT_TRUE(gate.bind_keys(three, {{"points", "3"}}, {}).has_value());
  ASSERT_TRUE(gate.bind_keys(one, {{"points", 1}}, {}).has_value());
  EXPECT_LT(wait_of(gate, seven, t0), kAtOnce);
  EXPECT_LT(wait_of(gate, three, t0), kAtOnce);
  EXPECT_GE(wait_of(gate, one, t0), 900ms);  // 10 of 10 units spent
}

TEST(CostFromJob, AMissingOrMalformedArgumentFailsTheStepNamingIt) {
  config::CallPolicy policy;
  policy.cost_template = "{{args.points}}";
  auto made = make_call_gate(policy, "portal/op");
  ASSERT_TRUE(made) << made.error().to_string();
  CallState step(TimePoint{});
  auto missing = (*made)->bind_keys(step, {{"title", "Heat"}}, {});
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("points"), std::string::npos) << missing.error().message();
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json("2.5"), nlohmann::json(-3),
                                    nlohmann::json("99999999"), nlohmann::json::array()}) {
    auto st = (*made)->bind_keys(step, {{"points", bad}}, {});
    ASSERT_FALSE(st.has_value()) << bad.dump();
    EXPECT_NE(st.error().message().find("not a whole number from 1 to 1000000"), std::string::npos)
        << st.error().message();
  }
}

}  // namespace
}  // namespace ratchet::retry
