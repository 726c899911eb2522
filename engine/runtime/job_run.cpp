#include "runtime/job_run.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace ratchet::runtime {

JobRun::JobRun(const RunEnv& env, store::ClaimedJob job) : env_(env), job_(std::move(job)) {
  cancel_.store(job_.cancel_requested);
  lease_until_.store(job_.lease_until);
}

void JobRun::lease_renewed(store::Micros until) {
  store::Micros seen = lease_until_.load();
  while (seen < until && !lease_until_.compare_exchange_weak(seen, until)) {
  }
}

std::string JobRun::idempotency_key(std::string_view step) const {
  return std::to_string(job_.id) + ":" + std::string(step);
}

std::optional<nlohmann::json> JobRun::checkpoint(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = job_.checkpoints.find(name);
  if (it == job_.checkpoints.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, nlohmann::json> JobRun::checkpoints() const {
  std::lock_guard lock(mu_);
  return job_.checkpoints;
}

SignalKind JobRun::signal() const {
  std::lock_guard lock(mu_);
  return signal_;
}

void JobRun::clear_park() {
  std::lock_guard lock(mu_);
  if (signal_ == SignalKind::kParked) signal_ = SignalKind::kNone;
}

TimePoint JobRun::park_until() const {
  std::lock_guard lock(mu_);
  return park_until_;
}

std::string JobRun::park_reason() const {
  std::lock_guard lock(mu_);
  return park_reason_;
}

void JobRun::mark_lost() {
  lost_.store(true);
  stop_.request_stop();
}

void JobRun::raise(SignalKind kind, TimePoint until, std::string reason) {
  {
    std::lock_guard lock(mu_);
    if (kind > signal_) {
      signal_ = kind;
      if (kind == SignalKind::kParked) {
        park_until_ = until;
        park_reason_ = std::move(reason);
      }
    } else if (kind == SignalKind::kParked && signal_ == SignalKind::kParked && until < park_until_) {
      park_until_ = until;
      park_reason_ = std::move(reason);
    }
  }
  throw RunSignal{kind};
}

void JobRun::check_boundary(Siblings siblings) {
  // Past its lease no write of this run commits (the fence), so a step
  // started now would only be called again by the next owner.
  if (env_.clock->now() >= lease_until()) mark_lost();
  if (lost_.load()) raise(SignalKind::kLost);
  if (cancel_.load()) raise(SignalKind::kCancelled);
  if (stopping_.load()) raise(SignalKind::kStopping);
  if (timed_out_.load()) throw AttemptTimedOut("the attempt's timeout passed");
  SignalKind pending = signal();
  if (pending == SignalKind::kParked && siblings == Siblings::kConcurrent) return;
  if (pending != SignalKind::kNone) throw RunSignal{pending};
}

void JobRun::claim_name(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!used_.insert(name).second) {
    throw std::logic_error("step name \"" + name + "\" is used twice in one run of job type \"" + job_.type +
                           "\"; step names must be unique within a job");
  }
}

void JobRun::commit(const std::string& name, const nlohmann::json& output, TimePoint started) {
  store::StepDone done{job_.id,
                       fence(),
                       name,
                       output.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       store::to_micros(started),
                       store::to_micros(env_.clock->now())};
  std::lock_guard lock(mu_);
  unwritten_.push_back(std::move(done));
  job_.checkpoints[name] = output;
}

store::LeaseWrite write_steps(store::JobStore& s, const std::vector<store::StepDone>& steps,
                              store::Micros lease_until, store::Micros now) {
  store::LeaseWrite w;
  for (const auto& step : steps) {
    w = s.checkpoint(step, lease_until, now);
    if (!w.held) break;
  }
  return w;
}

std::string step_names(const std::vector<store::StepDone>& steps) {
  std::string out;
  for (const auto& step : steps) out += (out.empty() ? "\"" : ", \"") + step.step + "\"";
  return out;
}

std::vector<store::StepDone> JobRun::take_unwritten() {
  std::lock_guard lock(mu_);
  return std::exchange(unwritten_, {});
}

void JobRun::write_checkpoints() {
  std::lock_guard writing(write_mu_);
  std::vector<store::StepDone> steps = take_unwritten();
  if (steps.empty()) return;
  // The store reads the time when the write runs: a write that waited for
  // a lock is fenced by the lease as it is then.
  const std::string names = step_names(steps);
  auto written = env_.store->write_run_under_lease(
      lease_until(),
      store::RunWrite{job_.id, fence(), std::move(steps), std::nullopt,
                      std::chrono::duration_cast<std::chrono::microseconds>(env_.lease).count()});
  if (!written) {
    // Not committed (or not known to be): give the job up. Its lease expires
    // and the next owner replays whatever did commit.
    spdlog::error("job {}: checkpoints of steps {} not written, so they will run again: {}", job_.id, names,
                  written.error().to_string());
    gave_up_unwritten_.store(true);
    mark_lost();
    raise(SignalKind::kLost);
  }
  if (!written->held) {
    spdlog::warn("job {}: lease lost before the checkpoints of steps {} were written; they will run again",
                 job_.id, names);
    mark_lost();
    raise(SignalKind::kLost);
  }
  lease_renewed(written->renewed_to);
  if (written->cancel_requested) cancel_.store(true);
}

nlohmann::json JobRun::step(std::string_view name, const std::function<nlohmann::json()>& fn) {
  std::string n(name);
  claim_name(n);
  if (auto c = checkpoint(n)) return *c;
  write_checkpoints();
  check_boundary();
  TimePoint started = env_.clock->now();
  nlohmann::json out;
  try {
    out = fn();
  } catch (const RunSignal&) {
    throw;
  } catch (const StepFailed&) {
    throw;
  } catch (const std::exception& e) {
    throw StepFailed(n, e.what());
  } catch (...) {
    throw StepFailed(n, "the step threw something that is not a std::exception");
  }
  // A signal raised inside fn (a nested call that parked) and swallowed there
  // still ends the run: this output is not committed.
  if (SignalKind pending = signal(); pending != SignalKind::kNone) throw RunSignal{pending};
  commit(n, out, started);
  return out;
}

nlohmann::json JobRun::call(std::string_view name, std::string_view operation, const nlohmann::json& args) {
  auto dot = operation.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == operation.size()) {
    throw StepFailed(std::string(name), "operation \"" + std::string(operation) +
                                            "\" must be written plugin.operation, e.g. imdb.get_rating");
  }
  return call_step(std::string(name), std::string(operation.substr(0, dot)),
                   std::string(operation.substr(dot + 1)), args, std::nullopt);
}

nlohmann::json JobRun::call_step(const std::string& name, const std::string& plugin,
                                 const std::string& operation, const nlohmann::json& args,
                                 std::optional<Duration> max_wait, Siblings siblings) {
  claim_name(name);
  if (auto c = checkpoint(name)) return *c;
  write_checkpoints();
  check_boundary(siblings);
  if (env_.caller == nullptr) {
    throw StepFailed(name,
                     "no plugin host is configured, so " + plugin + "." + operation + " cannot be called");
  }
  TimePoint started = env_.clock->now();
  StepCall call{plugin,       operation, args,
                job_.id,      name,      idempotency_key(name),
                job_.attempt, max_wait,  [this] { return lease_until(); },
                &job_.args};
  // Steps of one job may run on threads of their own (run_dag).
  store::CrashRecorder::Scope on_this_thread(env_.crashes, job_.id);
  while (true) {
    CallOutcome outcome = env_.caller->call(call, stop_.get_token());
    switch (outcome.kind()) {
      case CallOutcome::Kind::kOk:
        // The call happened: keep its output even if a cancel arrived meanwhile.
        commit(name, outcome.output(), started);
        return outcome.output();
      case CallOutcome::Kind::kFailed: throw StepFailed(name, outcome.error().to_string());
      case CallOutcome::Kind::kPark: {
        TimePoint now = env_.clock->now();
        if (outcome.until() - now > env_.park_threshold) {
          raise(SignalKind::kParked, outcome.until(),
                plugin + "." + operation + " (step " + name + "): " + outcome.reason());
        }
        // A short wait is cheaper in place than a park and a new claim.
        if (!env_.clock->wait_until(outcome.until(), stop_.get_token())) {
          check_boundary(siblings);
          raise(SignalKind::kStopping);
        }
        check_boundary(siblings);
        break;
      }
    }
  }
}

}  // namespace ratchet::runtime
