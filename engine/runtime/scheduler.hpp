// The worker pool of one engine: a dispatcher that claims due jobs in batches
// (each claim a lease), worker threads that run them, and a heartbeat that
// renews the leases of every job this engine holds and tells runs when
// their lease was lost or a cancel was requested.
//
// A worker does not wait for the write that ends a job: it queues it on the
// store's group commit and takes its next job; a finisher thread runs what
// follows each commit (events, wake-ups) in commit order. The job counts as
// running (and its lease is renewed) until then.
//
// While the store is stalled (another process holds the database's write
// lock past the busy timeout, and the writes of runs wait on their leases)
// the dispatcher claims nothing: a claim could not commit, and jobs claimed
// then would only spend their leases waiting.
//
// A job may be held twice by one engine: its run stalled past the lease and
// the dispatcher claimed it again. Runs are told apart by their claim token;
// only the newer claim is renewed, the older run is told it lost the job.
//
// The dispatcher keeps up to one batch of claimed jobs queued ahead of the
// workers (their leases are renewed too), so a worker that finishes a job
// starts the next without waiting for a claim to commit.
//
// Ownership: owned by the Engine; it borrows the store, clock and job types,
// which outlive it. Thread-safety: start/stop/wake from any thread, but
// start and stop not concurrently with each other.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "runtime/clock_watch.hpp"
#include "runtime/executor.hpp"
#include "runtime/job_types.hpp"

namespace ratchet::runtime {

struct SchedulerOptions {
  int workers = 8;
  Duration heartbeat = std::chrono::seconds(10);
  Duration poll_interval = std::chrono::milliseconds(200);
  std::vector<std::string> queues;
  int max_lease_expiries = 3;
};

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
  // A job of this engine becomes due at `at` (it parked or backs off until
  // then): the dispatcher looks for work at that moment rather than at its
  // next poll, so a job that parked for a reserved limiter slot comes back in
  // time to use it.
  void wake_at(TimePoint at);

 private:
  void dispatch_loop(std::stop_token stop);
  void worker_loop();
  void heartbeat_loop(std::stop_token stop);
  void wait_for_work(TimePoint deadline, std::stop_token stop);
  // Records how a run ended and, once committed, hands what follows to the
  // finisher.
  using ClaimKey = std::pair<JobId, std::int64_t>;  // job id and claim token
  void finish(ClaimKey key, Ending end);
  void finisher_loop();
  // Whether the dispatcher would claim now (under mu_): the queue ahead of
  // the workers is low and the engine holds less than two batches.
  bool claim_wanted() const;
  void finished(ClaimKey key, const Ending& end, const Result<store::LeaseWrite>& written);

  SchedulerOptions options_;
  ExecutorEnv env_;
  const JobTypes& types_;
  std::function<void()> on_job_done_;

  std::mutex mu_;
  std::condition_variable work_cv_;      // ready_ gained a job, or stopping
  std::condition_variable_any room_cv_;  // ready_ has room for another claim
  std::condition_variable idle_cv_;      // a run ended
  std::deque<store::ClaimedJob> ready_;
  std::map<ClaimKey, JobRun*> active_;
  std::map<ClaimKey, TimePoint> finishing_;  // ended, write not yet committed; its lease
  int running_ = 0;                          // taken by a worker and not yet finished
  std::uint64_t claim_seq_ = 0;              // claims taken so far (ClaimedJob::claim_seq)
  bool stopping_ = false;
  bool started_ = false;

  std::mutex wake_mu_;
  bool wake_pending_ = false;
  std::optional<TimePoint> next_due_;  // earliest wake_at() not yet reached
  std::stop_source* waiting_ = nullptr;

  std::mutex finish_mu_;
  std::condition_variable finish_cv_;
  std::deque<std::function<void()>> finish_queue_;
  bool finisher_stop_ = false;
  std::thread finisher_;

  std::jthread dispatcher_;
  std::jthread heartbeat_;
  ClockWatch clock_watch_;  // heartbeat thread only
  std::vector<std::thread> workers_;
};

}  // namespace ratchet::runtime
