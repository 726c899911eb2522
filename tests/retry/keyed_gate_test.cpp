// Keyed limits on a call gate: one budget per key of the call, stacked with
// the plugin's unkeyed limits; a throttled key never delays another key's
// calls; keys read from settings are named by a keyed hash, never by the
// secret itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
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
  if (auto* w = std::get_if<Gate::Wait>(&a)) {
    // A wait for its turn ends when the turn is granted: up to a horizon
    // before the slot, at the queue's next grant.
    if (w->turn) {
      auto next = gate.parts().turns->next_grant();
      return next ? *next + Gate::kTurnHorizon - now : Duration::max();
    }
    return w->until ? *w->until - now : Duration::max();
  }
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
  // Hex digits only: no part of the secret beyond what any hash may hold by
  // chance (a salted digest holds "4242" about once in 2,300 runs).
  EXPECT_TRUE(std::all_of(a.keys()[0].begin() + 1, a.keys()[0].end(), [](unsigned char c) {
    return std::isxdigit(c) != 0;
  })) << a.keys()[0];
  EXPECT_EQ(a.keys()[0].find("sk-live"), std::string::npos);
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
// Runs steps through `gate` as the engine does, each parked until its wait
// is over or (waiting for its turn) until it is woken; the turns that no
// step asks for are granted as their time comes, as the keeper does.
// Returns when each call went, in the order given.
std::vector<TimePoint> run_steps(Gate& gate, FakeClock& clock,
                                 std::vector<std::unique_ptr<CallState>>& steps) {
  struct Pending {
    std::optional<TimePoint> at;  // come back then
    bool woken = false;
  };
  std::vector<Pending> pending(steps.size());
  std::vector<TimePoint> went(steps.size(), TimePoint::max());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    pending[i].at = clock.now();
    steps[i]->on_turn([&pending, i](TimePoint) { pending[i].woken = true; });
  }
  for (int guard = 0; guard < 100'000; ++guard) {
    std::optional<TimePoint> next;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (went[i] != TimePoint::max()) continue;
      if (pending[i].woken) next = clock.now();
      if (pending[i].at) next = next ? std::min(*next, *pending[i].at) : *pending[i].at;
    }
    if (!next) break;
    if (gate.parts().turns) {
      if (auto g = gate.parts().turns->next_grant()) next = std::min(*next, *g);
    }
    if (*next > clock.now()) clock.set(*next);
    if (gate.parts().turns) gate.parts().turns->grant(clock.now());
    for (std::size_t i = 0; i < steps.size(); ++i) {
      Pending& p = pending[i];
      if (went[i] != TimePoint::max() || !(p.woken || (p.at && *p.at <= clock.now()))) continue;
      p.woken = false;
      p.at.reset();
      auto a = gate.admit(*steps[i], clock.now());
      if (auto* f = std::get_if<Gate::Fail>(&a)) {
        ADD_FAILURE() << f->error.to_string();
        went[i] = clock.now();
      } else if (auto* w = std::get_if<Gate::Wait>(&a)) {
        if (w->turn && steps[i]->turn_granted()) p.woken = true;
        p.at = w->until;
      } else {
        went[i] = clock.now();
        (void)gate.record(*steps[i], std::move(std::get<Gate::Go>(a).ticket), Outcome::ok(), {}, clock.now());
      }
    }
  }
  return went;
}

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
  for (int i = 0; i < 40; ++i) {
    steps.push_back(std::make_unique<CallState>(clock.now()));
    ASSERT_TRUE(gate->bind_keys(*steps.back(), account("alice"), {}));
  }
  // Each is woken when its key's window and its turn come, and goes then.
  const auto went = run_steps(*gate, clock, steps);
  std::map<std::int64_t, int> per_second;
  for (TimePoint t : went) ++per_second[std::chrono::duration_cast<std::chrono::seconds>(t - t0).count()];
  for (const auto& [second, n] : per_second) EXPECT_LE(n, 4) << "second " << second;
  EXPECT_EQ(per_second.size(), 10u);
  EXPECT_LT(*std::max_element(went.begin(), went.end()) - t0, 10s);
}

// One budget shared by every account (10 a second) and a loose one per
// account: with alice's thirty calls queued, bob's three still take turns
// with hers from the start, rather than after all of hers.
TEST(KeyedGate, ASharedBudgetIsGrantedInTurnsBetweenTheKeysThatWait) {
  FakeClock clock;
  auto gate = gate_of({limit(10, 1s), limit(100, 1s, "{{args.account}}")});
  ASSERT_TRUE(gate->parts().turns);
  std::vector<std::unique_ptr<CallState>> steps;
  for (int i = 0; i < 33; ++i) {
    steps.push_back(std::make_unique<CallState>(clock.now()));
    ASSERT_TRUE(gate->bind_keys(*steps.back(), account(i < 30 ? "alice" : "bob"), {}));
  }
  const TimePoint t0 = clock.now();
  const auto went = run_steps(*gate, clock, steps);
  const TimePoint bob_done = *std::max_element(went.begin() + 30, went.end());
  const TimePoint alice_done = *std::max_element(went.begin(), went.begin() + 30);
  // Alice's first ten took the first second's budget as they asked, before
  // bob asked. In turns, bob's calls then alternate with hers in the next
  // second; in the order asked they would come after all of hers, three
  // seconds in.
  EXPECT_LT(bob_done - t0, 1500ms) << "bob's last call went at +"
                                   << std::chrono::duration<double>(bob_done - t0).count() << " s";
  // The budget is used all the same: 33 calls at 10 a second.
  EXPECT_LT(alice_done - t0, 3500ms);
  // No second of the shared budget holds more than its ten.
  std::vector<TimePoint> sorted(went.begin(), went.end());
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 10; i < sorted.size(); ++i) EXPECT_GE(sorted[i] - sorted[i - 10], 1s) << i;
}

// The same with weights: the gold account gets three slots to the free one's one.
TEST(KeyedGate, WeightsOfTheKeysDivideTheSharedBudget) {
  FakeClock clock;
  auto keyed = limit(100, 1s, "{{args.account}}");
  keyed.weights = {{"gold", 3}};
  auto gate = gate_of({limit(10, 1s), keyed});
  std::vector<std::unique_ptr<CallState>> steps;
  for (int i = 0; i < 40; ++i) {
    steps.push_back(std::make_unique<CallState>(clock.now()));
    ASSERT_TRUE(gate->bind_keys(*steps.back(), account(i % 2 == 0 ? "gold" : "free"), {}));
  }
  const auto went = run_steps(*gate, clock, steps);
  std::vector<std::pair<TimePoint, bool>> by_time;
  for (std::size_t i = 0; i < went.size(); ++i) by_time.emplace_back(went[i], i % 2 == 0);
  std::sort(by_time.begin(), by_time.end());
  // The first ten went as they asked, the budget free; of the next twenty,
  // granted in turns, gold has three in four.
  int gold = 0;
  for (std::size_t i = 10; i < 30; ++i) gold += by_time[i].second ? 1 : 0;
  EXPECT_GE(gold, 14) << "of the twenty calls after the first ten";
  EXPECT_LE(gold, 16) << "of the twenty calls after the first ten";
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
