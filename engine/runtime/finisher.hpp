// Records how each run ended without holding its worker: the worker hands
// the run's last write to the store's group commit and takes its next job;
// once the write commits, the writer thread hands what follows (the event,
// waking the dispatcher for a parked job, telling a draining host) to the
// finisher thread, which runs it in commit order. Until then the job counts
// as running and its lease is renewed.
//
// Host callbacks never run on the writer thread: it only queues them here.
//
// Ownership: owned by the Scheduler; borrows its environment, held jobs and
// dispatcher. Thread-safety: finish() from any worker; start and stop from
// the Scheduler only, stop once no worker runs any more.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/dispatcher.hpp"
#include "runtime/executor.hpp"
#include "runtime/held_jobs.hpp"

namespace ratchet::runtime {

class Finisher {
 public:
  Finisher(const ExecutorEnv& env, HeldJobs& held, Dispatcher& dispatcher, std::function<void()> on_job_done);
  Finisher(const Finisher&) = delete;
  Finisher& operator=(const Finisher&) = delete;

  void start();
  // Runs what is queued, then ends the finisher thread.
  void stop();
  // Records how the run of `key` ended and, once committed, hands what
  // follows to the finisher thread.
  void finish(ClaimKey key, Ending end);

 private:
  void finisher_loop();
  void finished(ClaimKey key, const Ending& end, const Result<store::LeaseWrite>& written);

  const ExecutorEnv& env_;
  HeldJobs& held_;
  Dispatcher& dispatcher_;
  std::function<void()> on_job_done_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ratchet::runtime
