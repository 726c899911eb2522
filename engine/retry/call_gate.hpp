// The decorators around one plugin operation's calls, in the fixed order of
// docs/semantics.md: circuit breaker, then retry, then limiters (rate, then
// concurrency), then the call. A synchronous decision API: nothing here
// sleeps or blocks, so the engine can drive it from a worker and park a job
// whenever it is told to wait.
//
// One CallGate per plugin operation, shared by every step that calls it; one
// CallState per step call, kept by the step across its attempts and parks.
//
//   retry::CallState step(clock.now());
//   for (;;) {
//     auto a = gate.admit(step, clock.now());
//     if (auto* w = std::get_if<CallGate::Wait>(&a)) { park until w->until (or a release); continue; }
//     if (auto* f = std::get_if<CallGate::Fail>(&a)) { the step failed: f->error; break; }
//     auto& go = std::get<CallGate::Go>(a);
//     Outcome out = call_the_plugin(go.timeout);          // with the step's idempotency key
//     auto v = gate.record(step, std::move(go.ticket), out, reply_headers, clock.now());
//     if (std::holds_alternative<CallGate::Done>(v)) break;            // success
//     if (auto* f = std::get_if<CallGate::Fail>(&v)) { f->error; break; }  // retries exhausted
//     // RetryAt: park until ->at; ->throttled says it was throttling, not a failure
//   }
//
// admit(step, now):
//   1. the step's retry deadline has passed           -> Fail (kTimeout)
//   2. the step's backoff has not elapsed             -> Wait{backoff end, kBackoff}
//   3. the breaker is open                            -> Wait{half-open time, kCircuitOpen}
//                                                        (nullopt while half-open probes run)
//   4. no concurrency permit is free                  -> Wait{nullopt, kConcurrency}: come back
//                                                        when the release listener fires
//   5. the limiters (declared and learned) give a later slot -> Wait{slot time, kRateLimit};
//      the slot stays reserved in the CallState, so the step comes back to it in order.
//      With keyed limits, a wait that the step's own keys impose is held in
//      those keys' limiters alone, and the limits shared with other keys are
//      reserved when it is over: a slot far ahead in a shared limiter would
//      hold back every other key's calls behind it.
//      With turns (CallGateParts::turns), those shared slots are granted in
//      turns between keys: a step not yet granted gets Wait{fallback,
//      kRateLimit, turn = true} and is woken by its on_turn callback.
//      Waits for slots add to RetryState::throttled_wait; past max_wait -> Fail (kThrottled)
//   6. otherwise -> Go: the call may start now; the slot is counted. Each attempt takes
//      a new slot. Right before the request leaves, confirm_send(go.counted) counts it
//      anew if it is leaving late (connecting took long, the thread was descheduled). Go::timeout is the time
//      this attempt may take (per_try_timeout, the plugin's request timeout and the deadline's remainder).
// record(step, ticket, outcome, headers, now): reads the reply's rate headers
// into the learned pace, tells the breaker, and decides (retry/retry_decision.hpp):
//   Done | RetryAt{t, throttled} | Fail{error}
//
// Throttling is not failure: throttled retries and slot waits never use up
// retry.attempts; they are bounded by max_wait. Wait reasons let the engine
// count them apart from failed attempts.
//
// Thread-safety: CallGate is safe to share between threads. A CallState and a
// Ticket belong to one step at a time. A CallState destroyed while holding a
// reservation gives it back; a Ticket destroyed without record() releases its
// permit and its breaker probe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/spec.hpp"
#include "config/template.hpp"
#include "limit/adaptive_pacer.hpp"
#include "limit/concurrency.hpp"
#include "limit/database_limiter.hpp"
#include "limit/keyed_journal.hpp"
#include "limit/keyed_limiters.hpp"
#include "limit/limiter_stack.hpp"
#include "limit/rate_headers.hpp"
#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"
#include "retry/circuit_breaker.hpp"
#include "retry/outcome.hpp"
#include "retry/retry_decision.hpp"
#include "retry/turn_queue.hpp"

namespace ratchet::retry {

// A keyed limit on a gate: one budget per key of the call (config's
// LimitSpec::key), kept in `limiters`.
struct KeyedLimit {
  std::string key;  // the template, e.g. "{{args.account}}"
  std::shared_ptr<const config::KeyTemplate> parsed;
  bool hashed = false;  // it reads the plugin's settings: named by a keyed hash
  std::shared_ptr<limit::KeyedLimiters> limiters;
  // The starts of its keys, process scope with a database (null otherwise):
  // the journal of its owner's keyed limits over the same template, which
  // names this limit `journal_limit` (it records the starts while the
  // journal takes them from it).
  std::shared_ptr<limit::KeyedJournal> journal;
  std::uint64_t journal_limit = 0;
  // Turns between keys on the shared limits (TurnQueue) go by these weights,
  // by the key's text before any hashing; a key not named weighs 1.
  std::map<std::string, std::int64_t> weights;
};

// What a CallGate is built from. Limiters, the pacer, the breaker and the
// concurrency cap are shared objects: the integrator gives the same instance
// to every gate a limit or a plugin-wide state applies to.
struct CallGateParts {
  config::RetrySpec retry;
  Duration max_wait = std::chrono::hours(24);             // throttling waits of one step, in all
  Duration request_timeout = std::chrono::seconds(30);    // one request (CallPolicy::timeout)
  std::shared_ptr<CircuitBreaker> breaker;                // the plugin's; null: none
  std::vector<std::shared_ptr<limit::Limiter>> limiters;  // declared: the plugin's and the operation's
  std::vector<KeyedLimit> keyed;                          // declared per key; stack with the others
  std::string key_salt;                                   // of the hashed keys (limit/key_identity.hpp)
  // The learned pace per key of keyed[pacer_key] (AdaptivePacers), made on
  // the first reply of a key that says something about its limit; until
  // then a key's calls are paced by `pacer`. Null: one pace for the plugin.
  std::shared_ptr<limit::KeyedLimiters> key_pacers;
  std::size_t pacer_key = 0;
  std::shared_ptr<limit::AdaptivePacer> pacer;  // the plugin's learned pace; null: do not learn
  // With keyed limits: the slots of the limits the keys share are granted
  // in turns between the keys of keyed[0] (retry/turn_queue.hpp), shared by
  // every gate of the plugin. Null: in the order asked.
  std::shared_ptr<TurnQueue> turns;
  // Without keyed limits, who waits in turn: every step (a pace still being
  // learned), or only a step admitted at the operation's learned cost: its
  // slot is granted shortly before it comes, after the corrections of the
  // calls before it, rather than ahead, where their overdrafts would move
  // it and their refunds leave room nobody takes.
  bool every_step_in_turn = true;
  std::shared_ptr<limit::ConcurrencyLimiter> concurrency;  // null: no cap
  limit::RateHeaderOptions headers;                        // the caps on what headers impose
  std::uint64_t seed = 0x5eed;                             // jitter randomness
  // The units of the limits one call costs (the operation's `cost`), unless
  // its step says otherwise (CallState::set_units).
  std::int64_t cost = 1;
  // Or the job argument that holds it ("{{args.points}}"), read by bind_keys.
  std::optional<std::string> cost_template;
  // How long after its counted start a request may still leave as counted
  // (see confirm_send): well inside the jitter margin of the limits, which
  // also has to cover the way to the server.
  Duration send_slack = std::chrono::milliseconds(5);
};

// One step call's state across attempts and parks.
class CallState {
 public:
  explicit CallState(TimePoint began) { retry_.began = began; }

  const RetryState& retry_state() const { return retry_; }
  TimePoint not_before() const { return not_before_; }  // the current backoff's end
  // A slot held, or a place in turn for one (CallGateParts::turns).
  bool holds_slot() const { return reservation_.held() || key_hold_.held() || turn_ != nullptr; }
  std::optional<TimePoint> slot_at() const {
    if (reservation_.held()) return reservation_.at();
    if (key_hold_.held()) return key_hold_.at();
    return std::nullopt;
  }
  // The keys of its keyed limits, as named (CallGate::bind_keys).
  const std::vector<std::string>& keys() const { return keys_; }
  // The units its call costs (a plugin's estimate for one request); 0: the
  // gate's declared cost. Set before admit(); a slot held for another cost
  // is given back at the next admit.
  void set_units(std::int64_t units) { units_ = std::max<std::int64_t>(units, 0); }
  // Called, from any thread, when a turn it waits for (Wait::turn) is
  // granted: its holder resumes it. Set before admit().
  void on_turn(std::function<void(TimePoint slot)> wake) { wake_ = std::move(wake); }
  // A further request of `call` (null: of a call with no keys), already
  // admitted: it takes rate-limit slots in the call's keys, without waiting
  // for a turn, but no breaker probe or concurrency permit (the call holds
  // those; asking for its own, a call under a cap of one would wait for
  // itself). Its ticket is dropped, not recorded: only the call's reply
  // tells its outcome.
  void further_request_of(const CallState* call) {
    further_request_ = true;
    if (call == nullptr) return;
    keys_ = call->keys_;
    turn_weight_ = call->turn_weight_;
  }
  // Its turn was granted since it was told to wait for it.
  bool turn_granted() const { return turn_ && turn_->granted(); }

 private:
  friend class CallGate;
  RetryState retry_;
  TimePoint not_before_{};
  limit::Reservation reservation_;
  // A slot in its keys' limiters only, while those make it wait (see admit).
  limit::Reservation key_hold_;
  std::vector<std::string> keys_;
  // With keyed limits: the stack of every limit, its keys' after the
  // unkeyed ones, built by the gate named here (it holds the keys'
  // limiters, so none is dropped meanwhile).
  const void* stack_gate_ = nullptr;
  std::optional<limit::LimiterStack> stack_;
  std::shared_ptr<limit::AdaptivePacer> pacer_;  // the learned pace in stack_
  bool rewound_ = false;                         // admit() is asking again after a far move
  std::size_t own_limiters_ = 0;                 // the limiters of its keys in stack_, after the unkeyed
  std::int64_t units_ = 0;
  std::int64_t declared_units_ = 0;  // read from the job by the gate's cost template (bind_keys)
  std::int64_t learned_units_ = 0;   // fixed at its first admit from the gate's learned costs
  std::shared_ptr<Turn> turn_;       // its place in turn for the shared limits
  // Admitted at a learned cost: what its call is expected to cost beyond
  // that, counted until its reply comes (TurnQueue, "Costs in flight").
  UnitsInFlight::Hold excess_hold_;
  TimePoint turn_since_{};  // asked for its turn since
  double turn_weight_ = 1;  // its key's weight there (bind_keys)
  std::function<void(TimePoint)> wake_;
  bool further_request_ = false;
};

class CallGate {
 public:
  enum class WaitReason { kBackoff, kCircuitOpen, kConcurrency, kRateLimit };

  // The right to make one call: hold it while the call runs, then pass it to record().
  class Ticket {
   public:
    Ticket(Ticket&&) noexcept = default;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();
    TimePoint started() const { return started_; }

   private:
    friend class CallGate;
    Ticket() = default;
    limit::Permit permit_;
    std::shared_ptr<CircuitBreaker> breaker_;
    bool probe_ = false;
    TimePoint started_{};
  };

  struct Go {
    Ticket ticket;
    Duration timeout;  // this attempt's time budget
    // The call's start as the limiters count it: pass it to confirm_send()
    // right before the request leaves.
    limit::Reservation counted{};
  };
  struct Wait {
    std::optional<TimePoint> until;  // nullopt: until a permit or probe frees up
    WaitReason reason;
    // Waits for its turn on the limits its keys share: the step's on_turn
    // callback says when it is granted, and `until` is only a fallback.
    bool turn = false;
    // Waiting for its turn: the soonest its slot could come.
    std::optional<TimePoint> soonest{};
  };
  // How far ahead the turns of a gate made by make_call_gate grant slots
  // (the engine uses its park_threshold: a step granted waits in place).
  static constexpr Duration kTurnHorizon = std::chrono::milliseconds(50);
  // A slot granted anew is taken only when it is at least this much sooner.
  static constexpr Duration kRespaceGain = std::chrono::milliseconds(50);
  struct Fail {
    Error error;
  };
  struct Done {};
  struct RetryAt {
    TimePoint at;
    bool throttled;  // throttling (not a failed attempt)
  };

  using Admission = std::variant<Go, Wait, Fail>;
  using Verdict = std::variant<Done, RetryAt, Fail>;

  explicit CallGate(CallGateParts parts);

  // Names the keys of the gate's keyed limits for this step's call, from the
  // job's arguments and the plugin's settings, and reads its cost when the
  // operation's cost is a job argument; call before admit() (again
  // after a reload: a step whose keys changed gives its slot back). A key
  // that cannot be rendered (the job lacks the argument) is an
  // invalid_argument error naming it, as is a cost that is not a whole
  // number from 1 to 1,000,000. Without keyed limits or a cost template: nothing.
  [[nodiscard]] Status bind_keys(CallState& step, const nlohmann::json& job_args,
                                 const nlohmann::json& settings);

  Admission admit(CallState& step, TimePoint now);

  // `headers` are the reply's (empty when the plugin reported the outcome
  // itself). When `hint_out` is given it receives what the headers said, so
  // the caller can log a clamped or ignored value.
  Verdict record(CallState& step, Ticket ticket, const Outcome& outcome,
                 std::span<const limit::HttpHeader> headers, TimePoint now,
                 limit::PaceHint* hint_out = nullptr);

  // Asked right before the request of a call admitted with `counted` (Go::
  // counted, or another request's) leaves. A start counted more than
  // send_slack before `now` is counted anew at `now` (the limits hold at the
  // server only if a call counts when it gets there); a request that no
  // longer fits then must wait. Returns nullopt: send it now; a time: send
  // nothing before it, then ask again (`counted` holds its slot meanwhile,
  // and gives it back if dropped).
  [[nodiscard]] Result<std::optional<TimePoint>> confirm_send(limit::Reservation& counted, TimePoint now);

  // The call started on `counted` cost `units` (>= 0): every limit it was
  // counted in takes the difference at once (limit/limiter.hpp, "Units"),
  // so an overdraft makes the next calls wait. A reservation not started
  // (the request never left) is left as it is.
  [[nodiscard]] Status correct_cost(limit::Reservation& counted, std::int64_t units, TimePoint now);

  // What one call of the operation cost (a reply's report) or was expected
  // to cost (a request's estimate). A step with no cost of its own (no
  // estimate before admission, no cost argument) is then admitted at the
  // least of the last kCostMemory of these, and waits in turn (parts.turns):
  // its slot is granted shortly before it comes, after the corrections of
  // the calls before it. Sized at their least, a call is mostly corrected
  // upwards, an overdraft the next grants see at once; a refund behind a
  // slot already granted would free room nobody takes. Until its reply
  // comes it also counts what it is expected to cost beyond that (their
  // mean, expected_cost()) as in flight, and the next steps are granted
  // only with room for it (TurnQueue, "Costs in flight"). Until the first:
  // the declared cost, in the order asked.
  void learn_cost(std::int64_t units);
  // A reply to one of a call's requests came: the opening hold of the
  // learned pace (the first call goes alone until its server answers) ends,
  // as it would at record(), so that the call's own further requests go.
  void replied(TimePoint now);
  // The least of the costs remembered (0: nothing learned yet).
  std::int64_t learned_cost() const;
  // Their mean, rounded (0: nothing learned yet): what a call admitted at
  // learned_cost() is expected to cost.
  std::int64_t expected_cost() const;

  const CallGateParts& parts() const { return parts_; }

 private:
  double random01();
  std::int64_t units_of(const CallState& step) const {
    if (step.units_ > 0) return step.units_;
    if (step.declared_units_ > 0) return step.declared_units_;
    return step.learned_units_ > 0 ? step.learned_units_ : parts_.cost;
  }
  // Fixes a step's learned_units_ once, from the learned costs.
  void settle_units(CallState& step);
  // The limiters a step's call must pass: stack_, or with keyed limits the
  // stack of the step's keys.
  [[nodiscard]] Result<limit::LimiterStack*> stack_for(CallState& step, TimePoint now);

  CallGateParts parts_;
  limit::LimiterStack stack_;
  std::optional<config::KeyTemplate> cost_parsed_;  // parts_.cost_template
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  // The costs learned (learn_cost), the latest kCostMemory, oldest first.
  static constexpr std::size_t kCostMemory = 32;
  mutable std::mutex cost_mu_;
  std::deque<std::int64_t> costs_;
  // What the calls admitted at a learned cost may still add (see excess_hold_).
  std::shared_ptr<UnitsInFlight> in_flight_ = std::make_shared<UnitsInFlight>();
};

// The learned paces of a plugin's keys: AdaptivePacers over `floor` (the
// tightest of the plugin's declared pace and the keyed limit's own).
std::shared_ptr<limit::KeyedLimiters> make_key_pacers(Duration floor);

// The keyed limit `spec` declares (spec.key set); `db_key` (limiter_key)
// names its keys' state in the database for `scope = "database"`, kept on one
// connection that `connect` opens. `journal`: for process scope, the journal
// its keys' starts are kept in and read from (keyed_journal_options(),
// open_keyed_journal()), shared by the owner's keyed limits over the same
// template; null: none (without a database).
[[nodiscard]] Result<KeyedLimit> make_keyed_limit(const config::LimitSpec& spec, const std::string& db_key,
                                                  const limit::ConnectionFactory& connect,
                                                  std::shared_ptr<const Clock> clock = nullptr,
                                                  std::shared_ptr<limit::KeyedJournal> journal = nullptr);

// The options of the journal that the process-scope keyed limits of `specs`
// over the key template `key` share: kept for the longest of their windows,
// saved as often as the tightest needs; nullopt when there are none.
std::optional<limit::KeyedJournal::Options> keyed_journal_options(const std::vector<config::LimitSpec>& specs,
                                                                  const std::string& key);

// Opens the journal of `owner`'s keyed limits over `key` on the database
// `connect` opens, reading what earlier processes left as of the clock's now.
[[nodiscard]] Result<std::shared_ptr<limit::KeyedJournal>> open_keyed_journal(
    const std::string& owner, const std::string& key, limit::KeyedJournal::Options options,
    const limit::ConnectionFactory& connect, std::shared_ptr<const Clock> clock);

// The pace of the tightest declared limit (per / rate), the pacer's floor.
Duration declared_pace(const std::vector<config::LimitSpec>& limits);

// Builds a gate for one operation from its CallPolicy with limiters, pacer,
// breaker and concurrency cap of its own (nothing shared with other gates).
// `key_prefix` names database-scope limits ("imdb/get_rating"); `connect`
// opens the shared database for them.
[[nodiscard]] Result<std::shared_ptr<CallGate>> make_call_gate(const config::CallPolicy& policy,
                                                               const std::string& key_prefix,
                                                               const limit::ConnectionFactory& connect = {},
                                                               std::uint64_t seed = 0x5eed);

}  // namespace ratchet::retry
