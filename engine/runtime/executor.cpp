#include "runtime/executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
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

// `unwritten`: the steps whose checkpoints went with the write ("" if none).
void report_write(const Result<store::LeaseWrite>& w, JobId id, const char* what,
                  const std::string& unwritten) {
  const std::string again = unwritten.empty() ? "" : " (steps " + unwritten + " will run again)";
  if (!w) {
    spdlog::error("job {}: could not record that it {}{}: {}", id, what, again, w.error().to_string());
  } else if (!w->held) {
    spdlog::warn("job {}: lease lost before recording that it {}{}; another worker has it", id, what, again);
  }
}

using EndWrite = std::function<store::LeaseWrite(store::JobStore&, store::Micros now)>;

// The unwritten checkpoints first, then the write that ends the run; all or
// nothing (one savepoint), and nothing at all once the lease is gone. The
// time is read when the write runs, so a write that waited for a lock is
// fenced by the lease as it is then.
std::function<store::LeaseWrite(store::JobStore&)> with_checkpoints(std::vector<store::StepDone> steps,
                                                                    const Clock* clock, Duration lease,
                                                                    EndWrite ending) {
  return [steps = std::move(steps), clock, lease, ending = std::move(ending)](store::JobStore& s) {
    const TimePoint now = clock->now();
    const store::Micros now_us = store::to_micros(now);
    if (!steps.empty() && !write_steps(s, steps, store::to_micros(now + lease), now_us).held) {
      return store::LeaseWrite{};
    }
    return ending(s, now_us);
  };
}

}  // namespace

Ending execute(JobRun& run, const JobType* type, const ExecutorEnv& env) {
  const store::ClaimedJob& job = run.job();
  const Clock& clock = *env.run.clock;
  const store::Fence fence = run.fence();

  nlohmann::json result;
  std::optional<Failure> failure;
  if (type == nullptr) {
    failure = Failure{"", "job type \"" + job.type + "\" is not defined in this engine"};
  } else if (!job.args_problem.empty()) {
    failure = Failure{"",
                      "job type \"" + job.type + "\": arguments " + job.args_problem + "; at most " +
                          std::to_string(kMaxArgsDepth) +
                          " levels are accepted (stored arguments; enqueue a corrected job)",
                      true};
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
      store::CrashRecorder::Scope on_this_thread(env.run.crashes, job.id);
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
  // A failure that reached here outranks a park raised beside it (a step of
  // a handler's own threads): the attempt failed, and parking would only
  // call the failing step again.
  if (failure && run.signal() == SignalKind::kParked) run.clear_park();
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
  JobEvent event;
  event.id = job.id;
  event.type = job.type;
  event.attempt = job.attempt;
  const EventBus* events = env.events;
  Ending end;
  std::string unwritten;
  auto write = [&](EndWrite ending) {
    std::vector<store::StepDone> steps = run.take_unwritten();
    unwritten = step_names(steps);
    end.write = with_checkpoints(std::move(steps), &clock, env.run.lease, std::move(ending));
    end.lease_until = run.lease_until();
  };

  switch (signal) {
    case SignalKind::kLost:
      if (run.gave_up_unwritten()) {
        // Its lease holds: not "lost", so that a database that refuses
        // writes is not read as another worker taking the job.
        spdlog::warn(
            "job {}: given up, as its checkpoints could not be written; it runs again from its last written "
            "checkpoint once its lease expires",
            job.id);
      } else if (std::string steps = step_names(run.take_unwritten()); !steps.empty()) {
        spdlog::warn("job {}: lease lost; leaving it to its new owner, steps {} will run again", job.id,
                     steps);
      } else {
        spdlog::warn("job {}: lease lost; leaving it to its new owner", job.id);
      }
      return end;
    case SignalKind::kStopping:
      write([id, fence](store::JobStore& s, store::Micros now_us) {
        return s.release(id, fence, "engine stopping", now_us);
      });
      end.after = [id, unwritten](const Result<store::LeaseWrite>& w) {
        report_write(w, id, "was released", unwritten);
      };
      return end;
    case SignalKind::kParked: {
      auto until = store::to_micros(run.park_until());
      write([id, fence, until, reason = run.park_reason()](store::JobStore& s, store::Micros now_us) {
        // One park per wait: the row says how long this one is, so a step
        // parked again shows as such.
        const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::microseconds(std::max<store::Micros>(0, until - now_us)));
        return s.park(id, fence, until, reason + ", until +" + common::format_duration(wait), now_us);
      });
      end.after = [id, attempt, caller, forget_steps, unwritten](const Result<store::LeaseWrite>& w) {
        report_write(w, id, "was parked", unwritten);
        if (w && !w->held) forget_steps();
        if (w && w->held && caller != nullptr) caller->parked(id, attempt);
      };
      end.parked_until = run.park_until();
      return end;
    }
    case SignalKind::kCancelled:
      write([id, fence](store::JobStore& s, store::Micros now_us) {
        return s.finish_cancelled(id, fence, now_us);
      });
      end.after = [id, events, event, unwritten](const Result<store::LeaseWrite>& w) mutable {
        report_write(w, id, "was cancelled", unwritten);
        if (w && w->held) {
          event.kind = JobEvent::Kind::kCancelled;
          events->publish(event);
        }
      };
      return end;
    case SignalKind::kNone: break;
  }

  if (failure) {
    store::AttemptFailure f{job.id, fence, failure->step, failure->error, 0, std::nullopt};
    if (job.attempt < job.max_attempts && type != nullptr && !failure->permanent) {
      Duration delay = job_backoff_delay(type->spec.backoff, env.jitter->seed(), job.id, job.attempt);
      f.retry_at = store::to_micros(now + delay);
    }
    event.kind = f.retry_at ? JobEvent::Kind::kFailed : JobEvent::Kind::kDead;
    event.error =
        failure->step.empty() ? failure->error : "step \"" + failure->step + "\": " + failure->error;
    write([f](store::JobStore& s, store::Micros now_us) mutable {
      f.now = now_us;
      return s.fail_attempt(f);
    });
    end.after = [id, events, event, unwritten](const Result<store::LeaseWrite>& w) {
      report_write(w, id, "failed", unwritten);
      if (w && w->held) events->publish(event);
    };
    return end;
  }

  std::vector<store::StepDone> steps = run.take_unwritten();
  unwritten = step_names(steps);
  end.run = store::RunWrite{id, fence, std::move(steps),
                            result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                            std::chrono::duration_cast<std::chrono::microseconds>(env.run.lease).count()};
  end.lease_until = run.lease_until();
  event.kind = JobEvent::Kind::kCompleted;
  event.result = std::move(result);
  end.after = [id, events, event = std::move(event), unwritten](const Result<store::LeaseWrite>& w) {
    report_write(w, id, "completed", unwritten);
    if (w && w->held) events->publish(event);
  };
  return end;
}

}  // namespace ratchet::runtime
