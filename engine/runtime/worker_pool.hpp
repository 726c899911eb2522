// The worker threads of one engine: each takes the next claimed job queued
// in HeldJobs, runs it to the end of this run (runtime/executor.hpp) and
// hands how it ended to the finisher, then takes the next, without waiting
// for that write to commit.
//
// Ownership: owned by the Scheduler; borrows its options, environment, job
// types, held jobs and finisher. Thread-safety: start and stop from the
// Scheduler only, stop after the dispatcher has stopped.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/finisher.hpp"
#include "runtime/held_jobs.hpp"
#include "runtime/job_types.hpp"
#include "runtime/scheduler_options.hpp"

namespace ratchet::runtime {

class WorkerPool {
 public:
  WorkerPool(const SchedulerOptions& options, const ExecutorEnv& env, const JobTypes& types, HeldJobs& held,
             Finisher& finisher);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void start();
  // Asks running jobs to stop at their next step boundary, releases the
  // queued ones that no worker started, waits up to `grace` (real time),
  // then interrupts the runs, and returns once every run has ended and
  // handed its end to the finisher.
  void stop(std::chrono::steady_clock::duration grace);

 private:
  void worker_loop();

  const SchedulerOptions& options_;
  const ExecutorEnv& env_;
  const JobTypes& types_;
  HeldJobs& held_;
  Finisher& finisher_;
  std::vector<std::thread> threads_;
};

}  // namespace ratchet::runtime
