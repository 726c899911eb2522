// The job runtime of one engine, as four roles over the jobs it holds
// (runtime/held_jobs.hpp): the dispatcher claims due jobs, the worker pool
// runs them, the finisher records how they ended once their writes commit,
// and the lease heartbeat renews the leases of all of them. The Scheduler
// owns the roles and starts and stops them in an order that keeps every
// lease renewed while its job is held: the finisher and workers before the
// dispatcher that feeds them and the heartbeat last; on stop the dispatcher
// first (no claim arrives after the queue is emptied), then the workers, the
// finisher, and the heartbeat last.
//
// Ownership: owned by the Engine; it borrows the store, clock and job types,
// which outlive it. Thread-safety: start/stop/wake from any thread, but
// start and stop not concurrently with each other.
#pragma once

#include <chrono>
#include <functional>

#include "runtime/dispatcher.hpp"
#include "runtime/executor.hpp"
#include "runtime/finisher.hpp"
#include "runtime/held_jobs.hpp"
#include "runtime/job_types.hpp"
#include "runtime/lease_heartbeat.hpp"
#include "runtime/scheduler_options.hpp"
#include "runtime/worker_pool.hpp"

namespace ratchet::runtime {

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, ExecutorEnv env, const JobTypes& types,
            std::function<void()> on_job_done);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void start();
  // Stops claiming, asks running jobs to stop at their next step boundary,
  // waits up to `grace` (real time), then interrupts them, and releases every
  // job it still holds with its checkpoints.
  void stop(std::chrono::steady_clock::duration grace);
  // New work may be due (an enqueue, a finished job).
  void wake();
  // A job of this engine becomes due at `at` (Dispatcher::wake_at).
  void wake_at(TimePoint at);
  // The jobs held that no worker runs yet (HeldJobs::publish_backlog).
  std::shared_ptr<const std::atomic<std::int64_t>> backlog() const { return held_.backlog; }

 private:
  SchedulerOptions options_;
  ExecutorEnv env_;
  HeldJobs held_;
  Dispatcher dispatcher_;
  Finisher finisher_;
  WorkerPool workers_;
  LeaseHeartbeat heartbeat_;
  bool started_ = false;
};

}  // namespace ratchet::runtime
