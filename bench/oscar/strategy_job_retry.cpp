// Strategy (a): retry the whole job, with a per-job cache and backoff.
//
// What a background-job library gives out of the box (Sidekiq, Exq, Celery):
// a job calls the five portals one after another and caches each rating it
// gets, per job; the first 429 (or 5xx, or dropped connection) fails the job
// as a whole, and the job library re-enqueues it after an exponential
// backoff with jitter. The retry skips the portals already cached, so no
// portal is asked twice for a rating it already gave. Nothing paces the
// calls: a limit is discovered only by hitting it, and a throttled job waits
// out a backoff that knows nothing of when the portal's window resets.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <vector>

#include "portal_call.hpp"
#include "strategies.hpp"
#include "worker_pool.hpp"

namespace ratchet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A typical job library's defaults, shortened to the benchmark's time scale.
constexpr auto kInitialBackoff = 500ms;
constexpr auto kMaxBackoff = 16s;
constexpr int kMaxAttempts = 25;  // then the job is dead

// The job library's queue: jobs become due at a time; workers take the
// earliest due one. Finishes when every job has completed or died.
class DelayQueue {
 public:
  explicit DelayQueue(int jobs) : outstanding_(jobs) {
    const auto now = Clock::now();
    for (int job = 0; job < jobs; ++job) queue_.push({now, next_sequence_++, job});
  }

  // The next due job, waiting for it; nullopt once every job has finished
  // or on stop.
  std::optional<int> pop(std::stop_token stop) {
    std::unique_lock lock(mu_);
    while (!stop.stop_requested() && outstanding_ > 0) {
      if (queue_.empty()) {
        changed_.wait(lock, stop, [&] { return outstanding_ == 0 || !queue_.empty(); });
        continue;
      }
      const auto due = queue_.top().due;
      if (due <= Clock::now()) {
        const int job = queue_.top().job;
        queue_.pop();
        return job;
      }
      // Wake at the due time, or earlier when an earlier job is queued.
      changed_.wait_until(lock, stop, due,
                          [&] { return outstanding_ == 0 || (!queue_.empty() && queue_.top().due < due); });
    }
    return std::nullopt;
  }

  void retry_at(int job, Clock::time_point due) {
    {
      std::lock_guard lock(mu_);
      queue_.push({due, next_sequence_++, job});
    }
    changed_.notify_all();
  }

  // The job completed or died: it will not come back.
  void finish() {
    std::lock_guard lock(mu_);
    if (--outstanding_ == 0) changed_.notify_all();
  }

 private:
  struct Entry {
    Clock::time_point due;
    std::uint64_t sequence;  // first in, first out among jobs due at once
    int job;
    bool operator>(const Entry& o) const { return due != o.due ? due > o.due : sequence > o.sequence; }
  };

  std::mutex mu_;
  std::condition_variable_any changed_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  int outstanding_;
  std::uint64_t next_sequence_ = 0;
};

// Exponential with "equal" jitter: half the step for sure, half at random,
// so retries of jobs that failed together spread out.
Clock::duration backoff(int failures, WorkerRandom& random) {
  const double step_ms = std::min(
      std::chrono::duration<double, std::milli>(kMaxBackoff).count(),
      std::chrono::duration<double, std::milli>(kInitialBackoff).count() * std::pow(2.0, failures - 1));
  const double ms = step_ms / 2 + random.uniform(0, step_ms / 2);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

RunResult run_job_retry(const BenchSetup& setup) {
  auto [result, client] = start_strategy(setup);
  if (!client) return result;
  std::vector<int> failures(setup.movies.size(), 0);
  DelayQueue queue(static_cast<int>(setup.movies.size()));

  const auto run = run_workers(setup.workers, setup.deadline, [&](int worker, std::stop_token stop) {
    WorkerRandom random(setup.seed, worker);
    while (const auto job = queue.pop(stop)) {
      // The queue hands a job to one worker at a time, so its record and
      // cache are this worker's until it is re-enqueued.
      JobRecord& record = result.jobs[static_cast<std::size_t>(*job)];
      bool failed = false;
      bool fatal = false;
      for (std::size_t p = 0; p < kPortals && !failed; ++p) {
        if (record.ratings[p]) continue;  // cached by an earlier attempt
        const auto call =
            call_portal(*client, setup.portals[p], setup.movies[static_cast<std::size_t>(*job)], stop);
        if (call.ok()) {
          record.ratings[p] = call.rating;
        } else {
          failed = true;
          fatal = !call.transient();
        }
      }
      if (!failed) {
        record.completed = true;
        queue.finish();
      } else if (fatal || ++failures[static_cast<std::size_t>(*job)] >= kMaxAttempts) {
        queue.finish();  // dead: the job library gives up on it
      } else {
        queue.retry_at(*job, Clock::now() + backoff(failures[static_cast<std::size_t>(*job)], random));
      }
    }
  });
  result.makespan_s = run.seconds;
  if (run.cut_off) result.note = "cut off at the deadline";
  return result;
}

}  // namespace ratchet::bench
