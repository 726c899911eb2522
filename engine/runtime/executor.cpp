#include "runtime/executor.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "common/duration.hpp"
#include "runtime/dag_runner.hpp"

namespace ratchet::runtime {
namespace {

struct Failure {
  std::string step;
  std::string error;
};

void report_write(const Result<store::LeaseWrite>& w, JobId id, const char* what) {
  if (!w) {
    spdlog::error("job {}: could not record that it {}: {}", id, what, w.error().to_string());
  } else if (!w->held) {
    spdlog::warn("job {}: lease lost before recording that it {}; another worker has it", id, what);
  }
}

}  // namespace

void execute(JobRun& run, const JobType* type, const ExecutorEnv& env) {
  const store::ClaimedJob& job = run.job();
  store::Store& store = *env.run.store;
  const Clock& clock = *env.run.clock;
  const std::string& owner = env.run.owner;

  nlohmann::json result;
  std::optional<Failure> failure;
  if (type == nullptr) {
    failure = Failure{"", "job type \"" + job.type + "\" is not defined in this engine"};
  } else if (job.cancel_requested) {
    run.request_cancel();
  }
  // One watchdog per run, only for job types with a timeout; on the engine's
  // clock, so a test can drive it.
  std::jthread watchdog;
  if (type != nullptr && type->spec.timeout) {
    const TimePoint deadline = clock.now() + *type->spec.timeout;
    watchdog = std::jthread([&run, &clock, deadline](std::stop_token stop) {
      if (clock.wait_until(deadline, stop)) run.time_out();
    });
  }
  if (!failure && !run.cancel_requested()) {
    try {
      result = type->handler ? type->handler(run) : run_dag(run, type->spec, env.render);
    } catch (const RunSignal&) {
      // Recorded in the run.
    } catch (const StepFailed& e) {
      failure = Failure{e.step(), e.error()};
    } catch (const std::exception& e) {
      failure = Failure{"", e.what()};
    } catch (...) {
      failure = Failure{"", "the handler threw something that is not a std::exception"};
    }
  }

  if (watchdog.joinable()) {
    watchdog.request_stop();
    watchdog.join();
  }
  if (run.timed_out() && type != nullptr) {
    // Whatever the run ended with (a step cancelled mid-call, a park raised
    // as it was interrupted), it ran out of time.
    failure = Failure{failure ? failure->step : "",
                      "the attempt ran longer than job type \"" + job.type + "\"'s timeout of " +
                          common::format_duration(*type->spec.timeout) + " (raise [job." + job.type +
                          "] timeout, or split the work into more steps)"};
    run.clear_park();
  }
  SignalKind signal = run.signal();
  if (run.cancel_requested() && signal < SignalKind::kCancelled) signal = SignalKind::kCancelled;
  // A step interrupted because the engine is stopping is not the job's
  // fault: give the job back instead of failing its attempt.
  if (signal == SignalKind::kNone && failure && run.stopping()) signal = SignalKind::kStopping;
  // Only a parked run comes back for the steps the caller keeps; every other
  // ending leaves them to no one (completed, failed, cancelled, released or
  // taken by another worker).
  auto forget_steps = [&] {
    if (env.run.caller != nullptr) env.run.caller->forget(job.id, job.attempt);
  };
  if (signal != SignalKind::kParked) forget_steps();
  TimePoint now = clock.now();
  store::Micros now_us = store::to_micros(now);
  JobEvent event;
  event.id = job.id;
  event.type = job.type;
  event.attempt = job.attempt;

  switch (signal) {
    case SignalKind::kLost: spdlog::warn("job {}: lease lost; leaving it to its new owner", job.id); return;
    case SignalKind::kStopping: {
      auto w = store.write(
          [&](store::JobStore& s) { return s.release(job.id, owner, "engine stopping", now_us); });
      report_write(w, job.id, "was released");
      return;
    }
    case SignalKind::kParked: {
      auto until = store::to_micros(run.park_until());
      auto reason = run.park_reason();
      auto w = store.write([&](store::JobStore& s) { return s.park(job.id, owner, until, reason, now_us); });
      report_write(w, job.id, "was parked");
      if (w && !w->held) forget_steps();
      return;
    }
    case SignalKind::kCancelled: {
      auto w = store.write([&](store::JobStore& s) { return s.finish_cancelled(job.id, owner, now_us); });
      report_write(w, job.id, "was cancelled");
      if (w && w->held) {
        event.kind = JobEvent::Kind::kCancelled;
        env.events->publish(event);
      }
      return;
    }
    case SignalKind::kNone: break;
  }

  if (failure) {
    store::AttemptFailure f{job.id, owner, failure->step, failure->error, now_us, std::nullopt};
    if (job.attempt < job.max_attempts && type != nullptr) {
      Duration delay = backoff_delay(type->spec.backoff, job.attempt, env.jitter->next());
      f.retry_at = store::to_micros(now + delay);
    }
    auto w = store.write([&](store::JobStore& s) { return s.fail_attempt(f); });
    report_write(w, job.id, "failed");
    if (w && w->held) {
      event.kind = f.retry_at ? JobEvent::Kind::kFailed : JobEvent::Kind::kDead;
      event.error =
          failure->step.empty() ? failure->error : "step \"" + failure->step + "\": " + failure->error;
      env.events->publish(event);
    }
    return;
  }

  std::string result_json = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto w = store.write([&](store::JobStore& s) { return s.complete(job.id, owner, result_json, now_us); });
  report_write(w, job.id, "completed");
  if (w && w->held) {
    event.kind = JobEvent::Kind::kCompleted;
    event.result = std::move(result);
    env.events->publish(event);
  }
}

}  // namespace ratchet::runtime
