#include "retry/call_gate.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include "common/duration.hpp"
#include "config/bounds.hpp"
#include "config/template.hpp"
#include "limit/key_identity.hpp"
#include "limit/keyed_journal.hpp"
#include "limit/make_limiter.hpp"
#include "limit/micros.hpp"

namespace ratchet::retry {
namespace {

std::string show(Duration d) {
  return common::format_duration(std::chrono::ceil<std::chrono::microseconds>(std::max(d, Duration::zero())));
}

// Limiters count whole microseconds and round `now` up: a slot less than a
// microsecond ahead is now, not a wait.
bool ahead(TimePoint slot, TimePoint now) { return slot - now >= std::chrono::microseconds(1); }

}  // namespace

CallGate::Ticket::~Ticket() {
  if (breaker_ && probe_) breaker_->release_probe();
}

CallGate::CallGate(CallGateParts parts) : parts_(std::move(parts)), rng_(parts_.seed) {
  std::vector<std::shared_ptr<limit::Limiter>> all = parts_.limiters;
  if (parts_.pacer) all.push_back(parts_.pacer);
  stack_ = limit::LimiterStack(std::move(all));
  // Parsed once here, not at every admission (the config loader checked it).
  if (parts_.cost_template) {
    if (auto parsed = config::parse_key_template(*parts_.cost_template)) cost_parsed_ = std::move(*parsed);
  }
}

Status CallGate::bind_keys(CallState& step, const nlohmann::json& job_args, const nlohmann::json& settings) {
  if (parts_.cost_template) {
    auto text = cost_parsed_ ? config::render_key(*cost_parsed_, job_args, settings)
                             : config::render_key(*parts_.cost_template, job_args, settings);
    if (!text) return fail(text.error().with_context("cost " + *parts_.cost_template));
    const bool digits =
        !text->empty() && text->size() <= 7 && text->find_first_not_of("0123456789") == std::string::npos;
    const std::int64_t units = digits ? std::stoll(*text) : 0;
    if (units < 1 || units > config::kMaxCost) {
      return fail(Error::invalid_argument("cost " + *parts_.cost_template + ": the job's argument is \"" +
                                          text->substr(0, 40) + "\", not a whole number from 1 to 1000000"));
    }
    step.declared_units_ = units;
  }
  if (parts_.keyed.empty()) return {};
  std::vector<std::string> keys;
  const bool same_count = step.keys_.size() == parts_.keyed.size();
  for (std::size_t i = 0; i < parts_.keyed.size(); ++i) {
    const auto& k = parts_.keyed[i];
    auto text = k.parsed ? config::render_key(*k.parsed, job_args, settings)
                         : config::render_key(k.key, job_args, settings);
    if (!text) return fail(text.error());
    if (i == 0) {
      const auto weight = k.weights.find(*text);
      step.turn_weight_ = weight == k.weights.end() ? 1.0 : static_cast<double>(weight->second);
    }
    std::string name = limit::key_identity(*text, k.hashed, parts_.key_salt);
    // The common case: the same keys as at the step's last admission.
    if (same_count && keys.empty() && step.keys_[i] == name) continue;
    if (keys.empty()) {
      keys.reserve(parts_.keyed.size());
      if (same_count) keys.assign(step.keys_.begin(), step.keys_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    keys.push_back(std::move(name));
  }
  if (!keys.empty()) {
    (void)step.reservation_.cancel();
    (void)step.key_hold_.cancel();
    step.turn_.reset();
    step.stack_.reset();
    step.stack_gate_ = nullptr;
    step.keys_ = std::move(keys);
  }
  return {};
}

Result<limit::LimiterStack*> CallGate::stack_for(CallState& step, TimePoint now) {
  if (parts_.keyed.empty()) return &stack_;
  if (step.stack_gate_ == this && step.stack_) return &*step.stack_;
  if (step.keys_.size() != parts_.keyed.size())
    return fail(Error::internal("a call through keyed limits was admitted without its keys (bind_keys)"));
  // The keys' limiters follow the unkeyed ones (see keyed_of).
  std::vector<std::shared_ptr<limit::Limiter>> all;
  all.reserve(parts_.limiters.size() + parts_.keyed.size() + 1);
  all = parts_.limiters;
  const std::int64_t now_us = limit::to_micros(now);
  for (std::size_t i = 0; i < parts_.keyed.size(); ++i) {
    auto l = parts_.keyed[i].limiters->get(step.keys_[i], now_us);
    if (!l) return fail(l.error().with_context("the limit keyed by " + parts_.keyed[i].key));
    all.push_back(std::move(*l));
  }
  step.pacer_ = parts_.pacer;
  if (parts_.key_pacers && parts_.pacer_key < step.keys_.size()) {
    if (auto own = parts_.key_pacers->find(step.keys_[parts_.pacer_key]))
      step.pacer_ = std::static_pointer_cast<limit::AdaptivePacer>(own);
  }
  // A key's own learned pace is one of its own limiters (a wait for it is
  // held apart from the shared ones, as its declared limits' are).
  step.own_limiters_ = parts_.keyed.size() + (step.pacer_ && step.pacer_ != parts_.pacer ? 1 : 0);
  if (step.pacer_) all.push_back(step.pacer_);
  step.stack_.emplace(std::move(all));
  step.stack_gate_ = this;
  return &*step.stack_;
}

double CallGate::random01() {
  std::lock_guard lock(rng_mu_);
  return std::generate_canonical<double, 53>(rng_);
}

CallGate::Admission CallGate::admit(CallState& step, TimePoint now) {
  const auto& spec = parts_.retry;
  const std::optional<TimePoint> deadline =
      spec.deadline ? std::optional<TimePoint>(step.retry_.began + *spec.deadline) : std::nullopt;
  auto past_deadline = [&](TimePoint t) { return deadline && t >= *deadline; };
  auto timed_out = [&](const std::string& waiting_for) {
    (void)step.reservation_.cancel();
    (void)step.key_hold_.cancel();
    step.turn_.reset();
    return Fail{
        Error::timeout("the step's retry deadline of " + show(*spec.deadline) + " passed " + waiting_for)};
  };

  settle_units(step);
  // 1-2: deadline and backoff (the retry decorator).
  if (past_deadline(now)) return timed_out("before the call could start");
  if (now < step.not_before_) return Wait{step.not_before_, WaitReason::kBackoff};

  // 3: circuit breaker.
  CircuitBreaker::Admission b{true, false, std::nullopt};
  if (parts_.breaker && !step.further_request_) {
    b = parts_.breaker->admit(now);
    if (!b.allowed) {
      if (b.retry_at && past_deadline(*b.retry_at)) return timed_out("while the circuit breaker is open");
      // A held slot would only go stale while the circuit is open: let others use it.
      (void)step.reservation_.cancel();
      (void)step.key_hold_.cancel();
      step.turn_.reset();
      return Wait{b.retry_at, WaitReason::kCircuitOpen};
    }
  }
  Ticket ticket;
  ticket.breaker_ = b.probe ? parts_.breaker : nullptr;
  ticket.probe_ = b.probe;

  // 4: concurrency cap (before the rate slot, so a slot is not spent waiting for a permit).
  if (parts_.concurrency && !step.further_request_) {
    auto permit = parts_.concurrency->try_acquire();
    if (!permit) return Wait{std::nullopt, WaitReason::kConcurrency};
    ticket.permit_ = std::move(*permit);
  }

  // 5: rate limiters, declared and learned.
  auto wait_for_slot = [&](TimePoint at) -> Admission {
    const Duration wait = at - now;
    if (step.retry_.throttled_wait + wait > parts_.max_wait) {
      (void)step.reservation_.cancel();
      (void)step.key_hold_.cancel();
      step.turn_.reset();
      return Fail{Error::throttled("waiting " + show(step.retry_.throttled_wait + wait) +
                                   " in all for the plugin's rate limits would pass max_wait " +
                                   show(parts_.max_wait) + " (raise max_wait or the declared limits)")};
    }
    if (past_deadline(at)) return timed_out("before a rate-limit slot (at +" + show(wait) + ")");
    step.retry_.throttled_wait += wait;
    return Wait{at, WaitReason::kRateLimit};
  };
  // A keyed step whose slot in every limit, shared ones included, came out
  // far ahead (for its keys' next room: a move, or a race with another step
  // of its key) gives it back and waits for that room in its keys' limiters
  // alone, as at first.
  auto rewound = [&]() -> std::optional<Admission> {
    // In turns the slot was granted whole, in its key's order: it is kept.
    if (parts_.keyed.empty() || parts_.turns || step.rewound_ || step.reservation_.at() - now <= kRespaceGain)
      return std::nullopt;
    (void)step.reservation_.cancel();
    step.rewound_ = true;
    Admission again = admit(step, now);
    step.rewound_ = false;
    return again;
  };
  auto stack_of = stack_for(step, now);
  if (!stack_of) return Fail{stack_of.error().with_context("rate limiter")};
  limit::LimiterStack& stack = **stack_of;
  // In turns (CallGateParts::turns) the whole slot is granted when the
  // step's turn comes, once its keys' own limits (own_count of the stack's
  // limiters from own_first on) allow it. Sets reservation_ when granted;
  // otherwise says how the step waits.
  auto take_turn = [&](std::size_t own_first, std::size_t own_count) -> std::optional<Admission> {
    if (!step.turn_) step.turn_since_ = now;
    TurnQueue::Ask ask;
    ask.key = step.keys_.empty() ? std::string() : step.keys_[0];
    ask.weight = step.turn_weight_;
    ask.limiters = stack.limiters();
    ask.own_first = own_first;
    ask.own_count = own_count;
    ask.units = units_of(step);
    ask.wake = step.wake_;
    if (step.learned_units_ > 0 && step.units_ == 0 && step.declared_units_ == 0) {
      ask.in_flight = in_flight_;
      ask.excess = expected_cost() - step.learned_units_;
      ask.adopt = &step.excess_hold_;
    }
    auto granted = parts_.turns->ask(step.turn_, std::move(ask), now);
    if (!granted) return Fail{granted.error().with_context("rate limiter")};
    if (!*granted) {
      // Counted as waited once granted; max_wait bounds it meanwhile.
      const Duration waited = now - step.turn_since_;
      if (step.retry_.throttled_wait + waited > parts_.max_wait) {
        step.turn_.reset();
        return Fail{Error::throttled("waiting " + show(step.retry_.throttled_wait + waited) +
                                     " in all for the plugin's rate limits would pass max_wait " +
                                     show(parts_.max_wait) + " (raise max_wait or the declared limits)")};
      }
      return Wait{parts_.turns->fallback(now), WaitReason::kRateLimit, true, parts_.turns->soonest(now)};
    }
    step.retry_.throttled_wait += now - step.turn_since_;
    step.reservation_ = std::move(**granted);
    if (ahead(step.reservation_.at(), now)) return wait_for_slot(step.reservation_.at());
    return std::nullopt;
  };
  // A slot held from before a reload may be in limiters since replaced: a
  // start there would not count in the limits that apply now.
  const std::int64_t units = units_of(step);
  if (step.reservation_.held() &&
      (!stack.holds_slots_of(step.reservation_) || step.reservation_.units() != units)) {
    (void)step.reservation_.cancel();
  }
  bool in_turn = false;
  if (!step.reservation_.held() && !parts_.keyed.empty()) {
    // Keyed: a wait of the step's own keys is held in their limiters alone,
    // and the limits shared with other keys are reserved when it is over (a
    // slot far ahead in them would hold every other key's calls back).
    // Stacks of the two parts are made only when a wait needs them: most
    // calls find their keys' room at once and take the whole stack below.
    const auto& all = stack.limiters();
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(parts_.limiters.size());
    const auto last = first + static_cast<std::ptrdiff_t>(step.own_limiters_);
    const std::span<const std::shared_ptr<limit::Limiter>> own(first, last);
    if (step.key_hold_.held() &&
        (!std::ranges::equal(step.key_hold_.limiters(), own) || step.key_hold_.units() != units))
      (void)step.key_hold_.cancel();
    std::vector<std::shared_ptr<limit::Limiter>> shared(all.begin(), first);
    shared.insert(shared.end(), last, all.end());
    in_turn = parts_.turns != nullptr && !shared.empty() && !step.further_request_;
    if (in_turn) {
      (void)step.key_hold_.cancel();
      if (auto waits = take_turn(parts_.limiters.size(), step.own_limiters_)) return std::move(*waits);
    } else if (!step.key_hold_.held()) {
      auto earliest = limit::LimiterStack::earliest_of(own, now, units);
      if (!earliest) return Fail{earliest.error().with_context("rate limiter")};
      if (*earliest - now > kRespaceGain) {
        limit::LimiterStack own_stack(std::vector<std::shared_ptr<limit::Limiter>>(own.begin(), own.end()));
        auto r = own_stack.reserve(now, units);
        if (!r) return Fail{r.error().with_context("rate limiter")};
        step.key_hold_ = std::move(*r);
        if (ahead(step.key_hold_.at(), now)) return wait_for_slot(step.key_hold_.at());
      }
    } else if (ahead(step.key_hold_.at(), now)) {
      return Wait{step.key_hold_.at(), WaitReason::kRateLimit};  // came back early
    }
    if (!in_turn && step.key_hold_.held()) {
      // Its keys' time has come: it keeps that slot (given back, a slot of a
      // bucket or a pace would go to the end of the queue) and joins a slot
      // in the shared limits to it.
      limit::LimiterStack shared_stack(std::move(shared));
      auto r = shared_stack.reserve(now, units);
      if (!r) return Fail{r.error().with_context("rate limiter")};
      auto joined = stack.join(std::move(step.key_hold_), std::move(*r));
      if (!joined) return Fail{joined.error().with_context("rate limiter")};
      step.reservation_ = std::move(*joined);
      if (ahead(step.reservation_.at(), now)) return wait_for_slot(step.reservation_.at());
    }
  }
  const bool unkeyed_in_turn =
      parts_.turns && parts_.keyed.empty() && (parts_.every_step_in_turn || step.learned_units_ > 0);
  if (!step.reservation_.held() && unkeyed_in_turn && !step.further_request_) {
    in_turn = true;
    if (auto waits = take_turn(0, 0)) return std::move(*waits);
  } else if (!step.reservation_.held()) {
    auto r = stack.reserve(now, units);
    if (!r) return Fail{r.error().with_context("rate limiter")};
    step.reservation_ = std::move(*r);
    if (auto again = rewound()) return std::move(*again);
    if (ahead(step.reservation_.at(), now)) return wait_for_slot(step.reservation_.at());
  } else if (ahead(step.reservation_.at(), now)) {
    // Came back early (its wait already counted). A slot granted now may
    // come sooner than the one held: the learned pace sped up, or slots
    // ahead were given back.
    // In turns, a sooner slot would pass the keys ahead.
    if (!in_turn && !(parts_.turns && (!parts_.keyed.empty() || unkeyed_in_turn))) {
      auto sooner = stack.earliest(now, units);
      if (!sooner) return Fail{sooner.error().with_context("rate limiter")};
      if (*sooner + kRespaceGain < step.reservation_.at()) {
        auto r = stack.reserve(now, units);
        if (!r) return Fail{r.error().with_context("rate limiter")};
        step.reservation_ = std::move(*r);  // gives the later slot back
      }
    }
    if (ahead(step.reservation_.at(), now)) {
      const TimePoint at = step.reservation_.at();
      return Wait{at, WaitReason::kRateLimit};
    }
  }
  // Counted when it really starts: a start counted at its slot's earlier
  // time would reach the server closer to the next one than the limit allows.
  // A step that wakes a little late keeps its place (Limiter::ready_at).
  auto started = stack.start(step.reservation_, now);
  if (!started) return Fail{started.error().with_context("rate limiter")};
  if (!*started) {
    if (auto again = rewound()) return std::move(*again);
    return wait_for_slot(step.reservation_.at());
  }
  limit::Reservation counted = std::move(step.reservation_);
  step.reservation_ = limit::Reservation();

  // 6: go.
  ticket.started_ = now;
  ++step.retry_.attempts;
  Duration budget = parts_.request_timeout;
  if (spec.per_try_timeout) budget = std::min<Duration>(budget, *spec.per_try_timeout);
  if (deadline) budget = std::min<Duration>(budget, *deadline - now);
  return Go{std::move(ticket), budget, std::move(counted)};
}

Result<std::optional<TimePoint>> CallGate::confirm_send(limit::Reservation& counted, TimePoint now) {
  if (counted.started() && now - counted.counted_at() <= parts_.send_slack) return std::nullopt;
  if (!counted.started() && !counted.held()) return std::nullopt;  // counted nowhere: no limits
  // Recounted in the limiters it was counted in (with keyed limits, its keys').
  std::optional<limit::LimiterStack> own;
  if (!parts_.keyed.empty()) own.emplace(counted.limiters());
  auto go = (own ? *own : stack_).recount(counted, now);
  if (!go) return fail(go.error().with_context("rate limiter"));
  if (*go) return std::nullopt;
  return counted.at();
}

void CallGate::learn_cost(std::int64_t units) {
  if (units < 0) return;
  std::lock_guard lock(cost_mu_);
  costs_.push_back(units);
  if (costs_.size() > kCostMemory) costs_.pop_front();
}

std::int64_t CallGate::learned_cost() const {
  std::lock_guard lock(cost_mu_);
  if (costs_.empty()) return 0;
  return std::max<std::int64_t>(1, *std::ranges::min_element(costs_));
}

std::int64_t CallGate::expected_cost() const {
  std::lock_guard lock(cost_mu_);
  if (costs_.empty()) return 0;
  double sum = 0;
  for (std::int64_t c : costs_) sum += static_cast<double>(c);
  return std::llround(sum / static_cast<double>(costs_.size()));
}

void CallGate::settle_units(CallState& step) {
  if (step.units_ > 0 || step.declared_units_ > 0 || step.learned_units_ > 0) return;
  step.learned_units_ = std::min(learned_cost(), config::kMaxCost);
}

Status CallGate::correct_cost(limit::Reservation& counted, std::int64_t units, TimePoint now) {
  if (!counted.started()) return {};
  if (Status st = stack_.adjust(counted, units, now); !st)
    return fail(st.error().with_context("rate limiter"));
  return {};
}

void CallGate::replied(TimePoint now) {
  if (!parts_.pacer) return;
  parts_.pacer->replied(now);
  if (parts_.turns) parts_.turns->grant(now);
}

CallGate::Verdict CallGate::record(CallState& step, Ticket ticket, const Outcome& outcome,
                                   std::span<const limit::HttpHeader> headers, TimePoint now,
                                   limit::PaceHint* hint_out) {
  // Its reply came: what it cost is counted now, if its plugin said.
  step.excess_hold_.release();
  int status = outcome.http_status;
  if (outcome.kind == OutcomeKind::kThrottled) status = 429;
  limit::PaceHint hint = limit::read_rate_headers(headers, status, now, parts_.headers);
  if (outcome.retry_after) {
    const Duration wait = std::min(*outcome.retry_after, parts_.headers.max_wait);
    if (!hint.resume_at || *hint.resume_at < now + wait) {
      hint.resume_at = now + wait;
      hint.source = limit::HintSource::kRetryAfter;
    }
  }
  if (!outcome.held_back) {
    std::shared_ptr<limit::AdaptivePacer> pacer = step.pacer_ ? step.pacer_ : parts_.pacer;
    if (parts_.key_pacers && pacer == parts_.pacer && parts_.pacer_key < step.keys_.size() &&
        (!hint.empty() || hint.limit || hint.remaining)) {
      // The key's server said something: from now on the key has a pace of its own.
      auto own = parts_.key_pacers->get(step.keys_[parts_.pacer_key], limit::to_micros(now));
      if (own) {
        pacer = std::static_pointer_cast<limit::AdaptivePacer>(*own);
        step.stack_.reset();  // rebuilt with it at the next admission
        step.stack_gate_ = nullptr;
      }
    }
    if (pacer) {
      pacer->observe(hint, now, ticket.started(), units_of(step));
      if (parts_.pacer && pacer != parts_.pacer) parts_.pacer->replied(now);
      // The reply may free steps waiting in turn (the opening's first reply,
      // a window's remaining quota): granted now, not at the keeper's next look.
      if (parts_.turns) parts_.turns->grant(now);
    }
    if (parts_.breaker) parts_.breaker->record(outcome.is_failure(), ticket.probe_, now);
    ticket.probe_ = false;  // reported: the ticket must not release it again
  }
  RetryVerdict v =
      decide_retry(parts_.retry, parts_.max_wait, step.retry_, outcome, hint.resume_at, now, random01());
  if (hint_out) *hint_out = std::move(hint);
  switch (v.kind) {
    case RetryVerdict::Kind::kDone: return Done{};
    case RetryVerdict::Kind::kFail: return Fail{std::move(*v.error)};
    case RetryVerdict::Kind::kRetry: step.not_before_ = v.at; return RetryAt{v.at, v.throttled};
  }
  return Done{};
}

Result<KeyedLimit> make_keyed_limit(const config::LimitSpec& spec, const std::string& db_key,
                                    const limit::ConnectionFactory& connect,
                                    std::shared_ptr<const Clock> clock,
                                    std::shared_ptr<limit::KeyedJournal> journal) {
  if (!spec.key) return fail(Error::invalid_argument("limit " + db_key + " has no key"));
  KeyedLimit out;
  out.key = *spec.key;
  auto parsed = config::parse_key_template(*spec.key);
  if (!parsed) return fail(parsed.error().with_context("limit " + db_key));
  for (const auto& piece : parsed->pieces) {
    out.hashed = out.hashed || (piece.ref && piece.ref->root == config::TemplateRef::Root::kSettings);
  }
  out.parsed = std::make_shared<const config::KeyTemplate>(std::move(*parsed));
  out.weights = spec.weights;
  limit::KeyedLimiters::Make make;
  const std::int64_t window = spec.per.count() + limit::jitter_margin_us(spec.per.count());
  // A key unused for a window holds nothing that still counts; sweeping for
  // such keys walks them all, so it runs at most every 10 s (and whenever
  // the keys have doubled): memory stays within twice the live keys.
  const std::int64_t sweep_every = std::max<std::int64_t>(window, 10'000'000);
  if (spec.scope == config::LimitScope::kDatabase) {
    auto tables = limit::SharedLimiterTables::open(connect);
    if (!tables) return fail(tables.error().with_context("limit " + db_key));
    out.limiters = limit::make_keyed_database_limiters(spec, db_key, *tables, std::move(clock), sweep_every);
    return out;
  }
  if (journal) {
    // Each key's window holds across a reload and a restart: its starts are journaled.
    out.journal = journal;
    out.journal_limit = journal->enlist();
    make = [spec, db_key, journal, named = out.journal_limit](
               const std::string& key, std::int64_t now_us) -> Result<std::shared_ptr<limit::Limiter>> {
      auto made = limit::make_limiter(spec, db_key + "#" + key);
      if (!made) return made;
      auto history = journal->history(key, now_us);
      if (!history) return fail(history.error());
      (*made)->count_started(*history);
      return journal->journaled(key, named, std::move(*made));
    };
  } else {
    make = [spec, db_key](const std::string& key, std::int64_t) {
      return limit::make_limiter(spec, db_key + "#" + key);
    };
  }
  out.limiters = std::make_shared<limit::KeyedLimiters>(std::move(make), sweep_every);
  return out;
}

std::optional<limit::KeyedJournal::Options> keyed_journal_options(const std::vector<config::LimitSpec>& specs,
                                                                  const std::string& key) {
  std::int64_t keep = 0;
  std::int64_t rate = 0;
  std::int64_t per = 0;
  for (const auto& l : specs) {
    if (l.scope != config::LimitScope::kProcess || l.key != key) continue;
    const std::int64_t window = l.per.count() + limit::jitter_margin_us(l.per.count());
    keep = std::max(keep, window);
    rate = rate == 0 ? l.rate : std::min(rate, l.rate);
    per = per == 0 ? window : std::min(per, window);
  }
  if (keep == 0) return std::nullopt;
  return limit::KeyedJournal::Options::for_limits(keep, rate, per);
}

Result<std::shared_ptr<limit::KeyedJournal>> open_keyed_journal(const std::string& owner,
                                                                const std::string& key,
                                                                limit::KeyedJournal::Options options,
                                                                const limit::ConnectionFactory& connect,
                                                                std::shared_ptr<const Clock> clock) {
  const std::string name = limit::keyed_journal_owner(owner, key);
  auto tables = limit::SharedLimiterTables::open(connect);
  if (!tables) return fail(tables.error().with_context("limits of " + name));
  const TimePoint now = (clock ? clock : SystemClock::instance())->now();
  auto journal = limit::KeyedJournal::open(name, options, *tables, limit::to_micros(now));
  if (!journal) return fail(journal.error().with_context("limits of " + name));
  return journal;
}

std::shared_ptr<limit::KeyedLimiters> make_key_pacers(Duration floor) {
  auto options = std::make_shared<const limit::PacerOptions>(limit::plugin_pacing(floor));
  return std::make_shared<limit::KeyedLimiters>(
      [options](const std::string&, std::int64_t) -> Result<std::shared_ptr<limit::Limiter>> {
        return std::make_shared<limit::AdaptivePacer>(options);
      },
      limit::to_micros(limit::AdaptivePacer::kForgetAfter),
      [options](const limit::PackedLimiter& packed) {
        return limit::AdaptivePacer::unpack(options, packed);
      });
}

Duration declared_pace(const std::vector<config::LimitSpec>& limits) {
  Duration pace = Duration::zero();
  for (const auto& l : limits) {
    // A keyed limit paces each key, not the plugin.
    if (l.rate < 1 || l.key) continue;
    pace = std::max<Duration>(pace, std::chrono::duration_cast<Duration>(l.per) / l.rate);
  }
  return pace;
}

Result<std::shared_ptr<CallGate>> make_call_gate(const config::CallPolicy& policy,
                                                 const std::string& key_prefix,
                                                 const limit::ConnectionFactory& connect,
                                                 std::uint64_t seed) {
  CallGateParts parts;
  parts.retry = policy.retry;
  parts.max_wait = policy.max_wait;
  parts.headers.max_wait = policy.max_wait;
  parts.request_timeout = policy.timeout;
  parts.cost = policy.cost;
  parts.cost_template = policy.cost_template;
  if (policy.breaker.enabled) parts.breaker = std::make_shared<CircuitBreaker>(policy.breaker);
  const auto limit_name = [&](const config::LimitSpec& spec) {
    return spec.scope == config::LimitScope::kDatabase
               ? limit::database_limit_name(key_prefix, spec, policy.limits)
               : limit::limiter_key(key_prefix, spec);
  };
  // One journal per key template, with a database (limit/keyed_journal.hpp).
  std::map<std::string, std::shared_ptr<limit::KeyedJournal>> journals;
  for (const auto& spec : policy.limits) {
    if (spec.key) {
      std::shared_ptr<limit::KeyedJournal> journal;
      if (auto options = keyed_journal_options(policy.limits, *spec.key); options && connect) {
        auto& shared = journals[*spec.key];
        if (!shared) {
          auto opened = open_keyed_journal(key_prefix, *spec.key, *options, connect, nullptr);
          if (!opened) return fail(opened.error());
          shared = std::move(*opened);
        }
        journal = shared;
      }
      auto k = make_keyed_limit(spec, limit_name(spec), connect, nullptr, journal);
      if (!k) return fail(k.error());
      parts.keyed.push_back(std::move(*k));
      continue;
    }
    auto l = limit::make_limiter(spec, limit_name(spec), connect);
    if (!l) return fail(l.error());
    parts.limiters.push_back(std::move(*l));
  }
  parts.pacer = std::make_shared<limit::AdaptivePacer>(limit::plugin_pacing(declared_pace(policy.limits)));
  if (policy.concurrency) parts.concurrency = limit::ConcurrencyLimiter::make(*policy.concurrency);
  for (const auto& l : policy.limits) {
    if (!l.key) continue;
    parts.key_pacers = make_key_pacers(
        std::max(declared_pace(policy.limits), std::chrono::duration_cast<Duration>(l.per) / l.rate));
    break;  // the first keyed limit is parts.keyed[0]
  }
  if (!parts.keyed.empty()) {
    auto salt = limit::key_salt(connect);
    if (!salt) return fail(salt.error());
    parts.key_salt = std::move(*salt);
    parts.turns = std::make_shared<TurnQueue>(CallGate::kTurnHorizon);
  }
  parts.seed = seed;
  return std::make_shared<CallGate>(std::move(parts));
}

}  // namespace ratchet::retry
