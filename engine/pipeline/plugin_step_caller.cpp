#include "pipeline/plugin_step_caller.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "common/duration.hpp"
#include "common/secret_mask.hpp"
#include "config/bounds.hpp"
#include "pipeline/call_services.hpp"
#include "retry/outcome.hpp"

namespace ratchet::pipeline {
namespace {

const char* wait_reason(retry::CallGate::WaitReason r) {
  switch (r) {
    case retry::CallGate::WaitReason::kBackoff: return "backoff";
    case retry::CallGate::WaitReason::kCircuitOpen: return "circuit open";
    case retry::CallGate::WaitReason::kConcurrency: return "concurrency limit";
    case retry::CallGate::WaitReason::kRateLimit: return "rate limit";
  }
  return "wait";
}

// What one attempt came to, as the retry decorator classifies it.
retry::Outcome classify(const Result<plugin_host::CallReply>& reply, const CallServices& services) {
  if (!reply) {
    if (reply.error().code() == ErrorCode::kTimeout) return retry::Outcome::timeout(reply.error().message());
    return retry::Outcome::fatal(reply.error().message());
  }
  using S = plugin_host::CallStatus;
  switch (reply->status) {
    case S::kOk: return retry::Outcome::ok();
    case S::kThrottled: {
      std::optional<Duration> after;
      if (reply->retry_after) after = *reply->retry_after;
      retry::Outcome out = retry::Outcome::throttled(after, reply->message);
      // The plugin passes on a request the limits held back as throttling;
      // the server never saw it.
      out.held_back = services.last_transport_error() == http::TransportError::Kind::kHeldBack;
      return out;
    }
    case S::kRetryable: {
      using K = http::TransportError::Kind;
      if (auto e = services.last_transport_error()) {
        if (*e == K::kTimeout) return retry::Outcome::timeout(reply->message);
        if (*e == K::kConnect) return retry::Outcome::connect(reply->message);
      }
      if (services.last_status() >= 500) return retry::Outcome::http(services.last_status(), reply->message);
      return retry::Outcome::retryable(reply->message);
    }
    case S::kFatal: break;
  }
  return retry::Outcome::fatal(reply->message);
}

bool is_limiter_wait(retry::CallGate::WaitReason r) {
  return r == retry::CallGate::WaitReason::kRateLimit || r == retry::CallGate::WaitReason::kConcurrency;
}

}  // namespace

PluginStepCaller::PluginStepCaller(std::shared_ptr<plugin_host::PluginHost> host, config::ConfigPtr config,
                                   limit::ConnectionFactory connect, std::shared_ptr<const Clock> clock,
                                   std::uint64_t seed)
    : host_(std::move(host)),
      gates_(config, std::move(connect), seed, clock),
      clock_(std::move(clock)),
      config_(std::move(config)),
      keeper_(clock_) {
  keeper_.on_round([this](TimePoint now) { extend_turn_parks(now); });
}

void PluginStepCaller::set_extend(Extend extend) {
  std::lock_guard lock(mu_);
  extend_ = std::move(extend);
}

void PluginStepCaller::set_backlog(Backlog backlog) { gates_.set_backlog(std::move(backlog)); }

void PluginStepCaller::extend_turn_parks(TimePoint now) {
  std::lock_guard lock(mu_);
  if (!extend_ || now < next_extend_) return;
  next_extend_ = now + kTurnParkEvery;
  auto jobs = steps_.waiting_for_turns();
  // Queued under the lock: a turn granted after this is resumed by a write
  // queued after it, so a resume is never undone by a move.
  if (!jobs.empty()) extend_(std::move(jobs), now + kTurnPark);
}

config::ConfigPtr PluginStepCaller::current() const {
  std::lock_guard lock(mu_);
  return config_;
}

void PluginStepCaller::reconfigure(config::ConfigPtr config) {
  gates_.reconfigure(config);
  std::lock_guard lock(mu_);
  config_ = std::move(config);
  // Clients carry timeouts and size bounds: the next call builds a new one
  // where they changed (client_for compares), while calls in flight keep the
  // one they hold.
}

std::map<std::string, CallCounters> PluginStepCaller::counters() const {
  const TimePoint now = clock_->now();
  std::lock_guard lock(mu_);
  auto out = metrics_.counters();
  for (const auto& [key, entry] : steps_.entries()) {
    CallCounters& c = out[entry->plugin];
    if (entry->park != 0) ++c.parked_now;
    if (entry->limiter_wait_since)
      c.limiter_wait += std::max(Duration::zero(), now - *entry->limiter_wait_since);
  }
  return out;
}

void PluginStepCaller::end_limiter_wait(ParkedSteps::Entry& entry, TimePoint now) {
  if (!entry.limiter_wait_since) return;
  metrics_.add_limiter_wait(entry.plugin, now - *entry.limiter_wait_since);
  entry.limiter_wait_since.reset();
}

void PluginStepCaller::forget(JobId job, int attempt) {
  // Destroyed after the lock: a dropped step gives its reserved slot back,
  // which a database-scope limiter writes to the database.
  ParkedSteps::Entries dropped;
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->now();
  dropped = steps_.take(job, attempt);
  // The wait ends here: it counts as waited, without a slot to show for it.
  for (const auto& e : dropped) end_limiter_wait(*e, now);
}

void PluginStepCaller::set_resume(Resume resume) {
  std::lock_guard lock(mu_);
  resume_ = std::move(resume);
}

void PluginStepCaller::turn_granted(const ParkedSteps::Key& key,
                                    const std::weak_ptr<ParkedSteps::Entry>& entry, TimePoint slot) {
  bool resume_now = false;
  Resume resume;
  TimePoint at;
  {
    std::lock_guard lock(mu_);
    auto held = entry.lock();
    if (!held) return;
    // Back a park threshold before its slot, as from any park, to wait out
    // the rest in place.
    at = slot - config_->engine.park_threshold;
    resume_now = steps_.wake(key, held, at);
    resume = resume_;
  }
  if (resume_now && resume) resume(std::get<0>(key), std::get<2>(key), at);
}

void PluginStepCaller::parked(JobId job, int attempt) {
  std::optional<TimePoint> resume_now;
  Resume resume;
  {
    std::lock_guard lock(mu_);
    resume_now = steps_.park_committed(job, attempt);
    resume = resume_;
  }
  if (resume_now && resume) resume(job, attempt, *resume_now);
}

std::vector<ParkedJob> PluginStepCaller::parked_jobs() const {
  std::lock_guard lock(mu_);
  return steps_.parked_jobs();
}

void PluginStepCaller::forget_parked(JobId job, int attempt, std::uint64_t park) {
  ParkedSteps::Entries dropped;  // destroyed after the lock, as in forget()
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->now();
  dropped = steps_.take_parked(job, attempt, park);
  for (const auto& e : dropped) end_limiter_wait(*e, now);
}

std::vector<std::string> PluginStepCaller::secrets_of(const config::Config& config,
                                                      const config::PluginSpec* spec) const {
  // Every value the config took from the environment, wherever it went (a
  // key inside a URL template, a token inside a header, a step argument),
  // and whole settings marked secret, as a config built in code has them.
  std::vector<std::string> out(config.secret_values.begin(), config.secret_values.end());
  if (spec == nullptr) return out;
  for (const auto& path : spec->secret_paths) {
    auto ptr = nlohmann::json::json_pointer(path);
    if (spec->settings.contains(ptr) && spec->settings.at(ptr).is_string()) {
      out.push_back(spec->settings.at(ptr).get<std::string>());
    }
  }
  return out;
}

std::optional<runtime::CallOutcome> PluginStepCaller::setup_fault(const runtime::StepCall& call,
                                                                  ParkedSteps::Entry& entry,
                                                                  const Error& error) {
  if (error.code() != ErrorCode::kDatabase && error.code() != ErrorCode::kIo) return std::nullopt;
  const Duration wait = std::min<Duration>(
      std::chrono::seconds(std::int64_t{1} << std::min(entry.setup_faults, 6)), std::chrono::minutes(1));
  ++entry.setup_faults;
  const TimePoint now = clock_->now();
  {
    std::lock_guard lock(mu_);
    auto [logged, first] = setup_logged_.try_emplace(call.plugin, now);
    if (first || now - logged->second >= kSetupLogEvery) {
      logged->second = now;
      spdlog::warn(
          "plugin {}: calls cannot be set up; their steps wait and try again, no attempt charged: {}",
          call.plugin, error.message());
    }
  }
  return runtime::CallOutcome::park_until(
      now + wait, "could not be set up (" + error.message() + "); trying again in " +
                      common::format_duration(std::chrono::duration_cast<std::chrono::microseconds>(wait)));
}

runtime::CallOutcome PluginStepCaller::call(const runtime::StepCall& call, std::stop_token stop) {
  const std::string where = "step " + call.step + " (" + call.plugin + "." + call.operation + ")";
  config::ConfigPtr config = current();
  const config::PluginSpec* spec = nullptr;
  if (auto it = config->plugins.find(call.plugin); it != config->plugins.end()) spec = &it->second;
  const config::CallPolicy& policy = config->policy_for(call.plugin, call.operation);

  // The step's retry state and reserved slot survive parks in steps_.
  const ParkedSteps::Key key{call.job_id, call.step, call.attempt};
  std::shared_ptr<ParkedSteps::Entry> entry;
  {
    std::lock_guard lock(mu_);
    entry = steps_.come_back(key, call.plugin, clock_->now());
  }
  retry::CallState& step = entry->call;
  step.on_turn([this, key, held = std::weak_ptr<ParkedSteps::Entry>(entry)](TimePoint slot) {
    turn_granted(key, held, slot);
  });
  auto finish = [&](runtime::CallOutcome outcome) {
    const TimePoint now = clock_->now();
    std::lock_guard lock(mu_);
    if (outcome.kind() == runtime::CallOutcome::Kind::kPark) {
      metrics_.count_park(call.plugin);
      steps_.park(key, entry);
      return outcome;
    }
    end_limiter_wait(*entry, now);
    steps_.remove(key, entry);
    // A call cut short by the engine's stop runs again later: it has no
    // outcome to time.
    const bool interrupted =
        stop.stop_requested() || (outcome.kind() == runtime::CallOutcome::Kind::kFailed &&
                                  outcome.error().code() == ErrorCode::kCancelled);
    if (!interrupted) metrics_.observe_step(call.plugin, call.operation, now - entry->started);
    return outcome;
  };

  auto client = clients_.client_for(call.plugin, policy);
  if (!client) {
    if (auto wait = setup_fault(call, *entry, client.error())) return finish(std::move(*wait));
    return finish(runtime::CallOutcome::failed(client.error().with_context(where)));
  }

  const Duration park_threshold = config->engine.park_threshold;
  const nlohmann::json settings = spec != nullptr ? spec->settings : nlohmann::json::object();
  const common::SecretMask secrets(secrets_of(*config, spec));
  const plugin_host::CallContext context{call.idempotency_key, std::to_string(call.job_id), call.step};

  for (;;) {
    if (stop.stop_requested())
      return finish(runtime::CallOutcome::failed(Error::cancelled(where + ": stopped")));
    // A reload may have rebuilt the gate while this step waited in place.
    auto gate = gates_.gate(call.plugin, call.operation);
    if (!gate) {
      if (auto wait = setup_fault(call, *entry, gate.error())) return finish(std::move(*wait));
      return finish(runtime::CallOutcome::failed(gate.error().with_context(where)));
    }
    static const nlohmann::json kNoArgs = nlohmann::json::object();
    if (Status keyed = (*gate)->bind_keys(step, call.job_args ? *call.job_args : kNoArgs, settings); !keyed) {
      // The key is named from the arguments or the settings, never quoted.
      return finish(runtime::CallOutcome::failed(keyed.error().with_context(where)));
    }
    if (!entry->estimated) {
      // Asked once per attempt, before its first admission: a call that
      // knows its size waits once, for a slot that size.
      entry->estimated = true;
      const std::int64_t units = host_->estimate(call.plugin, call.operation, call.args, settings);
      if (units > 0 && units <= config::kMaxCost) step.set_units(units);
    }
    TimePoint now = clock_->now();
    std::uint64_t ended_before = 0;
    {
      std::lock_guard lock(mu_);
      end_limiter_wait(*entry, now);
      ended_before = steps_.calls_ended(call.plugin);
    }
    auto admission = (*gate)->admit(step, now);
    if (auto* f = std::get_if<retry::CallGate::Fail>(&admission)) {
      if (auto wait = setup_fault(call, *entry, f->error)) return finish(std::move(*wait));
      return finish(runtime::CallOutcome::failed(f->error.with_context(where)));
    }
    if (auto* w = std::get_if<retry::CallGate::Wait>(&admission)) {
      if (is_limiter_wait(w->reason)) {
        std::lock_guard lock(mu_);
        entry->limiter_wait_since = now;
      }
      if (w->turn) {
        // Its turn on the limits its keys share comes when the keeper (or
        // another step) grants it: parked until then, `until` a fallback.
        if (auto turns = (*gate)->parts().turns) keeper_.watch(turns);
        std::lock_guard lock(mu_);
        if (step.turn_granted()) continue;  // granted while it looked
        steps_.park_for_turn(key, entry);
        metrics_.count_park(call.plugin);
        // Parked until the soonest its slot could come, and at least a
        // little while, moved on while this process lives and the turn has
        // not come: a grant sets it to its slot.
        const TimePoint soonest = w->soonest.value_or(now) - park_threshold;
        const TimePoint until = extend_ ? std::max(soonest, now + kTurnPark) : *w->until;
        return runtime::CallOutcome::park_until(until, "rate limit, waiting for its turn");
      }
      if (!w->until) {
        // A wait for a permit or a probe has no known end, but a call of the
        // plugin ending frees it: park until then, with the plugin's request
        // timeout as a fallback (the call holding it ends by then).
        std::lock_guard lock(mu_);
        const bool for_permit = w->reason == retry::CallGate::WaitReason::kConcurrency;
        if (!steps_.park_for_release(key, entry, call.plugin, for_permit, ended_before))
          continue;  // freed while it looked: look again
        metrics_.count_park(call.plugin);
        return runtime::CallOutcome::park_until(now + std::max<Duration>(policy.timeout, park_threshold),
                                                wait_reason(w->reason));
      }
      TimePoint until = *w->until;
      if (until - now > park_threshold) {
        // Come back a park threshold early and wait out the rest here, so
        // the call starts at its slot's time whatever the wake-up delay.
        return finish(runtime::CallOutcome::park_until(until - park_threshold, wait_reason(w->reason)));
      }
      clock_->wait_until(until, stop);
      continue;
    }
    auto& go = std::get<retry::CallGate::Go>(admission);
    entry->setup_faults = 0;
    CallServices services(**client, **gate, *clock_, go.timeout, secrets, stop, &go.counted, call.lease_until,
                          &step);
    auto reply = host_->call(call.plugin, call.operation, call.args, settings, services, context,
                             std::chrono::duration_cast<std::chrono::milliseconds>(go.timeout));
    // What the plugin said may quote its settings or a server's answer; it
    // is masked before anything classifies, logs, cuts or stores it.
    if (reply) {
      reply->message = secrets.mask(reply->message);
      reply->output = secrets.mask_json(reply->output);
    } else {
      reply = fail(Error(reply.error().code(), secrets.mask(reply.error().message())));
    }
    if (!reply && reply.error().code() == ErrorCode::kNotFound) {
      return finish(runtime::CallOutcome::failed(reply.error().with_context(where)));
    }
    // A plugin that expects its request to cost more than the call was
    // admitted with: the step asks for that much from now on.
    if (services.wanted_units() > 0) step.set_units(services.wanted_units());
    retry::Outcome outcome = classify(reply, services);
    {
      std::lock_guard lock(mu_);
      if (!outcome.held_back)
        metrics_.count_call(call.plugin, outcome.kind == retry::OutcomeKind::kThrottled);
    }
    limit::PaceHint hint;
    auto verdict =
        (*gate)->record(step, std::move(go.ticket), outcome, services.last_headers(), clock_->now(), &hint);
    // The permit and any probe are released: resume who waits for them.
    std::vector<std::pair<JobId, int>> resumed;
    Resume resume;
    {
      std::lock_guard lock(mu_);
      resumed = steps_.end_call(call.plugin);
      resume = resume_;
    }
    if (resume) {
      for (const auto& [job, attempt] : resumed) resume(job, attempt, clock_->now());
    }
    // These quote header values a server chose.
    if (hint.clamped) spdlog::warn("plugin {}: {}", call.plugin, secrets.mask(*hint.clamped));
    for (const auto& ignored : hint.ignored)
      spdlog::debug("plugin {}: ignored {}", call.plugin, secrets.mask(ignored));

    if (std::holds_alternative<retry::CallGate::Done>(verdict)) {
      return finish(runtime::CallOutcome::ok(reply->output));
    }
    if (auto* f = std::get_if<retry::CallGate::Fail>(&verdict)) {
      return finish(runtime::CallOutcome::failed(
          Error(f->error.code(), secrets.mask(f->error.message())).with_context(where)));
    }
    auto& again = std::get<retry::CallGate::RetryAt>(verdict);
    if (!again.throttled) {
      std::lock_guard lock(mu_);
      metrics_.count_retry(call.plugin);
    }
    now = clock_->now();
    if (again.at - now > park_threshold) {
      return finish(runtime::CallOutcome::park_until(again.at - park_threshold,
                                                     again.throttled ? "throttled" : "retry backoff"));
    }
    clock_->wait_until(again.at, stop);
  }
}

}  // namespace ratchet::pipeline
