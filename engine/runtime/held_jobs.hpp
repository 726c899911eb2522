// The jobs one engine holds a lease on, from claim to committed end: queued
// ahead of the workers, running, or ended with their write not yet
// committed. The dispatcher adds to it, the worker pool takes from it, the
// finisher removes what committed, and the heartbeat renews every lease in
// it; one mutex guards it all, so each sees the others' changes whole.
//
// A job may be held twice by one engine: its run stalled past the lease and
// the dispatcher claimed it again. Runs are told apart by their claim token;
// only the newer claim is renewed, the older run is told it lost the job.
//
// Ownership: owned by the Scheduler, borrowed by its roles; the runs in
// `active` live on their workers' stacks. Thread-safety: every member but
// `batch` and `backlog` under `mu`.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/job_run.hpp"
#include "store/job_store.hpp"

namespace ratchet::runtime {

using ClaimKey = std::pair<JobId, std::int64_t>;  // job id and claim token

struct HeldJobs {
  explicit HeldJobs(int workers) : batch(static_cast<std::size_t>(workers)) {}

  // Whether the dispatcher would claim now (under mu): the queue ahead of
  // the workers is low and the engine holds less than two batches.
  bool claim_wanted() const {
    const auto held = static_cast<std::size_t>(running) + ready.size();
    return ready.size() <= batch / 2 && held < 2 * batch;
  }

  const std::size_t batch;  // one claim's worth: as many jobs as workers

  // The fresh jobs in `ready`, and one batch more when the last claim left
  // more fresh ones due in the database: calls still to come, for the step
  // caller's limits (StepCaller::set_backlog). Read without mu. A resumed
  // job is not counted: parked for a limiter's slot, it holds that slot,
  // and the limiter counts it already (heard again, a run's last calls
  // were taken for more than its last window holds); one parked for a
  // retry's backoff is missed, which at worst sends a window's last units
  // at once instead of probing its end.
  void publish_backlog() {
    const auto fresh =
        std::count_if(ready.begin(), ready.end(), [](const store::ClaimedJob& j) { return !j.resumed; });
    const std::size_t jobs = static_cast<std::size_t>(fresh) + (more_fresh_in_store ? batch : 0);
    backlog->store(static_cast<std::int64_t>(jobs), std::memory_order_relaxed);
  }
  const std::shared_ptr<std::atomic<std::int64_t>> backlog = std::make_shared<std::atomic<std::int64_t>>(0);
  // The last claim took its limit, more were due, and the last it took was
  // fresh: resumed jobs are claimed first, so those left are fresh too.
  bool more_fresh_in_store = false;

  std::mutex mu;
  std::condition_variable work_cv;      // ready gained a job, or stopping
  std::condition_variable_any room_cv;  // ready has room for another claim
  std::condition_variable idle_cv;      // a run ended
  std::deque<store::ClaimedJob> ready;
  std::map<ClaimKey, JobRun*> active;
  std::map<ClaimKey, TimePoint> finishing;  // ended, write not yet committed; its lease
  int running = 0;                          // taken by a worker and not yet finished
  std::uint64_t claim_seq = 0;              // claims taken so far (ClaimedJob::claim_seq)
  bool stopping = false;
};

}  // namespace ratchet::runtime
