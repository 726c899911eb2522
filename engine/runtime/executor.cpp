#include "runtime/executor.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "common/duration.hpp"
#include "runtime/args_check.hpp"
#include "runtime/dag_runner.hpp"

namespace ratchet::runtime {
namespace {

struct Failure {
  std::string step;
  std::string error;
  bool permanent = false;  // another attempt cannot do better: the job is dead at once
};

void report_write(const Result<store::LeaseWrite>& w, JobId id, const char* what) {
  if (!w) {
    spdlog::error("job {}: could not record that it {}: {}", id, what, w.error().to_string());
  } else if (!w->held) {
    spdlog::warn("job {}: lease lost before recording that it {}; another worker has it", id, what);
  }
}

// The unwritten checkpoints first, then the write that ends the run; all or
// nothing (one savepoint), and nothing at all once the lease is gone.
std::function<store::LeaseWrite(store::JobStore&)> with_checkpoints(
    std::vector<store::StepDone> steps, store::Micros lease_until,
    std::function<store::LeaseWrite(store::JobStore&)> ending) {
  if (steps.empty()) return ending;
  return [steps = std::move(steps), lease_until, ending = std::move(ending)](store::JobStore& s) mutable {
    if (!write_steps(s, steps, lease_until).held) return store::LeaseWrite{};
    return ending(s);
  };
}

}  // namespace

Ending execute(JobRun& run, const JobType* type, const ExecutorEnv& env) {
  const store::ClaimedJob& job = run.job();
  const Clock& clock = *env.run.clock;
  const std::string& owner = env.run.owner;

  nlohmann::json result;
  std::optional<Failure> failure;
  if (type == nullptr) {
    failure = Failure{"", "job type \"" + job.type + "\" is not defined in this engine"};
  } else if (auto bounded = check_args_bounds(job.type, job.args); !bounded) {
    // Written before enqueue checked these bounds: refused before anything
    // walks the arguments recursively.
    failure = Failure{"", bounded.error().message() + " (stored arguments; enqueue a corrected job)", true};
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
  StepCaller* caller = env.run.caller;
  const JobId id = job.id;
  const int attempt = job.attempt;
  auto forget_steps = [caller, id, attempt] {
    if (caller != nullptr) caller->forget(id, attempt);
  };
  if (signal != SignalKind::kParked) forget_steps();
  TimePoint now = clock.now();
  store::Micros now_us = store::to_micros(now);
  JobEvent event;
  event.id = job.id;
  event.type = job.type;
  event.attempt = job.attempt;
  const EventBus* events = env.events;
  Ending end;
  auto write = [&](std::function<store::LeaseWrite(store::JobStore&)> ending) {
    end.write =
        with_checkpoints(run.take_unwritten(), store::to_micros(now + env.run.lease), std::move(ending));
  };

  switch (signal) {
    case SignalKind::kLost:
      spdlog::warn("job {}: lease lost; leaving it to its new owner", job.id);
      return end;
    case SignalKind::kStopping:
      write([id, owner, now_us](store::JobStore& s) {
        return s.release(id, owner, "engine stopping", now_us);
      });
      end.after = [id](const Result<store::LeaseWrite>& w) { report_write(w, id, "was released"); };
      return end;
    case SignalKind::kParked: {
      auto until = store::to_micros(run.park_until());
      write([id, owner, until, reason = run.park_reason(), now_us](store::JobStore& s) {
        return s.park(id, owner, until, reason, now_us);
      });
      end.after = [id, forget_steps](const Result<store::LeaseWrite>& w) {
        report_write(w, id, "was parked");
        if (w && !w->held) forget_steps();
      };
      end.parked_until = run.park_until();
      return end;
    }
    case SignalKind::kCancelled:
      write([id, owner, now_us](store::JobStore& s) { return s.finish_cancelled(id, owner, now_us); });
      end.after = [id, events, event](const Result<store::LeaseWrite>& w) mutable {
        report_write(w, id, "was cancelled");
        if (w && w->held) {
          event.kind = JobEvent::Kind::kCancelled;
          events->publish(event);
        }
      };
      return end;
    case SignalKind::kNone: break;
  }

  if (failure) {
    store::AttemptFailure f{job.id, owner, failure->step, failure->error, now_us, std::nullopt};
    if (job.attempt < job.max_attempts && type != nullptr && !failure->permanent) {
      Duration delay = job_backoff_delay(type->spec.backoff, env.jitter->seed(), job.id, job.attempt);
      f.retry_at = store::to_micros(now + delay);
    }
    event.kind = f.retry_at ? JobEvent::Kind::kFailed : JobEvent::Kind::kDead;
    event.error =
        failure->step.empty() ? failure->error : "step \"" + failure->step + "\": " + failure->error;
    write([f](store::JobStore& s) { return s.fail_attempt(f); });
    end.after = [id, events, event](const Result<store::LeaseWrite>& w) {
      report_write(w, id, "failed");
      if (w && w->held) events->publish(event);
    };
    return end;
  }

  std::string result_json = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  write([id, owner, result_json = std::move(result_json), now_us](store::JobStore& s) {
    return s.complete(id, owner, result_json, now_us);
  });
  event.kind = JobEvent::Kind::kCompleted;
  event.result = std::move(result);
  end.after = [id, events, event = std::move(event)](const Result<store::LeaseWrite>& w) {
    report_write(w, id, "completed");
    if (w && w->held) events->publish(event);
  };
  return end;
}

}  // namespace ratchet::runtime
