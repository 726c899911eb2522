// The dispatcher of one engine: claims due jobs in batches (each claim a
// lease) when the workers have room, and queues them in HeldJobs. It sleeps
// until new work may be due: a wake() (an enqueue, a finished job, a
// notification from the store), a wake_at() time, the next job's run-at, or
// at most a poll interval.
//
// It keeps up to one batch of claimed jobs queued ahead of the workers
// (their leases are renewed too), so a worker that finishes a job starts the
// next without waiting for a claim to commit.
//
// While the store is stalled (another process holds the database's write
// lock past the busy timeout, and the writes of runs wait on their leases)
// it claims nothing: a claim could not commit, and jobs claimed then would
// only spend their leases waiting.
//
// Ownership: owned by the Scheduler; borrows its options, environment, job
// types and held jobs. Thread-safety: wake/wake_at from any thread; start
// and stop from the Scheduler only.
#pragma once

#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "runtime/executor.hpp"
#include "runtime/held_jobs.hpp"
#include "runtime/job_types.hpp"
#include "runtime/scheduler_options.hpp"

namespace ratchet::runtime {

class Dispatcher {
 public:
  Dispatcher(const SchedulerOptions& options, const ExecutorEnv& env, const JobTypes& types, HeldJobs& held);
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void start();
  // Returns once the dispatcher thread has ended: no claim lands in
  // HeldJobs::ready after that.
  void stop();
  // New work may be due.
  void wake();
  // A job of this engine becomes due at `at` (it parked or backs off until
  // then): the dispatcher looks for work at that moment rather than at its
  // next poll, so a job that parked for a reserved limiter slot comes back in
  // time to use it.
  void wake_at(TimePoint at);

 private:
  void dispatch_loop(std::stop_token stop);
  void wait_for_work(TimePoint deadline, std::stop_token stop);

  const SchedulerOptions& options_;
  const ExecutorEnv& env_;
  const JobTypes& types_;
  HeldJobs& held_;

  std::mutex wake_mu_;
  bool wake_pending_ = false;
  std::optional<TimePoint> next_due_;  // earliest wake_at() not yet reached
  std::stop_source* waiting_ = nullptr;

  std::jthread thread_;
};

}  // namespace ratchet::runtime
