// Renews the leases of every job this engine holds (queued, running, or
// ended with its write not yet committed), every heartbeat period, and
// tells runs when their lease was lost or a cancel was requested. Only the
// newer of two claims on one job is renewed; the older run is told it lost
// the job. It also watches the wall clock step away from the engine's.
//
// Ownership: owned by the Scheduler; borrows its options, environment and
// held jobs. Thread-safety: start and stop from the Scheduler only.
#pragma once

#include <stop_token>
#include <thread>

#include "runtime/clock_watch.hpp"
#include "runtime/executor.hpp"
#include "runtime/held_jobs.hpp"
#include "runtime/scheduler_options.hpp"

namespace ratchet::runtime {

class LeaseHeartbeat {
 public:
  LeaseHeartbeat(const SchedulerOptions& options, const ExecutorEnv& env, HeldJobs& held);
  LeaseHeartbeat(const LeaseHeartbeat&) = delete;
  LeaseHeartbeat& operator=(const LeaseHeartbeat&) = delete;

  void start();
  void stop();

 private:
  void heartbeat_loop(std::stop_token stop);

  const SchedulerOptions& options_;
  const ExecutorEnv& env_;
  HeldJobs& held_;
  ClockWatch clock_watch_;  // heartbeat thread only
  std::jthread thread_;
};

}  // namespace ratchet::runtime
