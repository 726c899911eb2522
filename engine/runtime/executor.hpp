// Runs one claimed job to the end of this run and records how it ended:
// completed (with its result), attempt failed (retryable with the job type's
// backoff, or dead after the last attempt), parked until a time, released to
// another worker (engine stopping), cancelled, or nothing at all when the
// lease was lost (the job is someone else's now).
//
// execute() runs the job and returns its Ending: the write that records how
// the run ended (with the checkpoints of steps not written yet, in the same
// transaction) and what follows once that write committed (the event). The
// caller commits the write without holding its worker (Store::write_async),
// then runs `after` off the writer thread. An Ending refers to nothing of the
// run, which may be gone by then.
//
// Thread-safety: execute() runs on a worker thread; many at once.
#pragma once

#include <functional>
#include <optional>

#include "runtime/backoff.hpp"
#include "runtime/event_bus.hpp"
#include "runtime/job_run.hpp"
#include "runtime/job_types.hpp"
#include "runtime/template_renderer.hpp"

namespace ratchet::runtime {

struct ExecutorEnv {
  RunEnv run;
  TemplateRenderer render;
  Jitter* jitter = nullptr;
  const EventBus* events = nullptr;
};

struct Ending {
  // Empty, and no `run` either: nothing to write (the lease was lost).
  std::function<store::LeaseWrite(store::JobStore&)> write;
  // Set instead of `write` for a run that completed: its steps and result,
  // which the store may write together with other runs' (Store::write_run_async).
  std::optional<store::RunWrite> run;
  std::function<void(const Result<store::LeaseWrite>&)> after;
  // The lease `write` is made under (Store::write_async's lease_until).
  std::optional<TimePoint> lease_until;
  // Set when the run parked: the job is due again then.
  std::optional<TimePoint> parked_until;
};

Ending execute(JobRun& run, const JobType* type, const ExecutorEnv& env);

}  // namespace ratchet::runtime
