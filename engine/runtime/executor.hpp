// Runs one claimed job to the end of this run and records how it ended:
// completed (with its result), attempt failed (retryable with the job type's
// backoff, or dead after the last attempt), parked until a time, released to
// another worker (engine stopping), cancelled, or nothing at all when the
// lease was lost (the job is someone else's now). Publishes the event after
// the write is committed.
//
// Thread-safety: execute() runs on a worker thread; many at once.
#pragma once

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

void execute(JobRun& run, const JobType* type, const ExecutorEnv& env);

}  // namespace ratchet::runtime
