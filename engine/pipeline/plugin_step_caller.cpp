#include "pipeline/plugin_step_caller.hpp"

#include <spdlog/spdlog.h>

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
      return retry::Outcome::throttled(after, reply->message);
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

}  // namespace

PluginStepCaller::PluginStepCaller(std::shared_ptr<plugin_host::PluginHost> host, config::ConfigPtr config,
                                   limit::ConnectionFactory connect, std::shared_ptr<const Clock> clock,
                                   std::uint64_t seed)
    : host_(std::move(host)),
      gates_(config, std::move(connect), seed),
      clock_(std::move(clock)),
      config_(std::move(config)) {}

config::ConfigPtr PluginStepCaller::current() const {
  std::lock_guard lock(mu_);
  return config_;
}

void PluginStepCaller::reconfigure(config::ConfigPtr config) {
  gates_.reconfigure(config);
  std::lock_guard lock(mu_);
  config_ = std::move(config);
  // Clients carry timeouts and size bounds: rebuild them for the next call.
  clients_.clear();
}

std::map<std::string, CallCounters> PluginStepCaller::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

Result<http::Client*> PluginStepCaller::client_for(const std::string& plugin,
                                                   const config::CallPolicy& policy) {
  std::lock_guard lock(mu_);
  if (auto it = clients_.find(plugin); it != clients_.end()) return it->second.get();
  http::ClientOptions options;
  options.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(policy.connect_timeout);
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(policy.timeout);
  options.max_response_bytes = policy.max_response_bytes;
  options.max_redirects = policy.max_redirects;
  auto made = http::Client::create(options);
  if (!made) return fail(made.error().with_context("HTTP client of plugin " + plugin));
  return clients_.emplace(plugin, std::move(*made)).first->second.get();
}

std::vector<std::string> PluginStepCaller::secrets_of(const config::PluginSpec* spec) const {
  std::vector<std::string> out;
  if (spec == nullptr) return out;
  for (const auto& path : spec->secret_paths) {
    auto ptr = nlohmann::json::json_pointer(path);
    if (spec->settings.contains(ptr) && spec->settings.at(ptr).is_string()) {
      out.push_back(spec->settings.at(ptr).get<std::string>());
    }
  }
  return out;
}

runtime::CallOutcome PluginStepCaller::call(const runtime::StepCall& call, std::stop_token stop) {
  const std::string where = "step " + call.step + " (" + call.plugin + "." + call.operation + ")";
  config::ConfigPtr config = current();
  const config::PluginSpec* spec = nullptr;
  if (auto it = config->plugins.find(call.plugin); it != config->plugins.end()) spec = &it->second;
  const config::CallPolicy& policy = config->policy_for(call.plugin, call.operation);

  auto gate = gates_.gate(call.plugin, call.operation);
  if (!gate) return runtime::CallOutcome::failed(gate.error().with_context(where));
  auto client = client_for(call.plugin, policy);
  if (!client) return runtime::CallOutcome::failed(client.error().with_context(where));

  // The step's retry state and reserved slot survive parks in this map.
  StepKey key{call.job_id, call.step, call.attempt};
  std::shared_ptr<retry::StepCall> step;
  {
    std::lock_guard lock(mu_);
    auto& slot = steps_[key];
    if (!slot) slot = std::make_shared<retry::StepCall>(clock_->now());
    step = slot;
  }
  auto finish = [&](runtime::CallOutcome outcome) {
    std::lock_guard lock(mu_);
    if (outcome.kind() == runtime::CallOutcome::Kind::kPark) {
      ++counters_[call.plugin].parks;
    } else {
      steps_.erase(key);
    }
    return outcome;
  };

  const Duration park_threshold = config->engine.park_threshold;
  const nlohmann::json settings = spec != nullptr ? spec->settings : nlohmann::json::object();
  const std::vector<std::string> secrets = secrets_of(spec);
  const plugin_host::CallContext context{call.idempotency_key, std::to_string(call.job_id), call.step};

  for (;;) {
    if (stop.stop_requested())
      return finish(runtime::CallOutcome::failed(Error::cancelled(where + ": stopped")));
    TimePoint now = clock_->now();
    auto admission = (*gate)->admit(*step, now);
    if (auto* f = std::get_if<retry::CallGate::Fail>(&admission)) {
      return finish(runtime::CallOutcome::failed(f->error.with_context(where)));
    }
    if (auto* w = std::get_if<retry::CallGate::Wait>(&admission)) {
      // A wait for a permit has no known end: look again shortly, parking
      // the job if even that is longer than the park threshold.
      TimePoint until = w->until.value_or(now + park_threshold);
      if (until - now > park_threshold) {
        // Come back a park threshold early and wait out the rest here, so
        // the call starts at its slot's time whatever the wake-up delay.
        return finish(runtime::CallOutcome::park_until(until - park_threshold, wait_reason(w->reason)));
      }
      clock_->wait_until(until, stop);
      continue;
    }
    auto& go = std::get<retry::CallGate::Go>(admission);
    CallServices services(**client, **gate, *clock_, go.timeout, secrets, stop);
    auto reply = host_->call(call.plugin, call.operation, call.args, settings, services, context,
                             std::chrono::duration_cast<std::chrono::milliseconds>(go.timeout));
    if (!reply && reply.error().code() == ErrorCode::kNotFound) {
      return finish(runtime::CallOutcome::failed(reply.error().with_context(where)));
    }
    retry::Outcome outcome = classify(reply, services);
    {
      std::lock_guard lock(mu_);
      auto& c = counters_[call.plugin];
      ++c.calls;
      if (outcome.kind == retry::OutcomeKind::kThrottled) ++c.throttled;
    }
    limit::PaceHint hint;
    auto verdict =
        (*gate)->record(*step, std::move(go.ticket), outcome, services.last_headers(), clock_->now(), &hint);
    if (hint.clamped) spdlog::warn("plugin {}: {}", call.plugin, *hint.clamped);
    for (const auto& ignored : hint.ignored) spdlog::debug("plugin {}: ignored {}", call.plugin, ignored);

    if (std::holds_alternative<retry::CallGate::Done>(verdict)) {
      return finish(runtime::CallOutcome::ok(reply->output));
    }
    if (auto* f = std::get_if<retry::CallGate::Fail>(&verdict)) {
      return finish(runtime::CallOutcome::failed(
          Error(f->error.code(), mask_secrets(f->error.message(), secrets)).with_context(where)));
    }
    auto& again = std::get<retry::CallGate::RetryAt>(verdict);
    if (!again.throttled) {
      std::lock_guard lock(mu_);
      ++counters_[call.plugin].retries;
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
