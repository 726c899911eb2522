// Strategy (c): blind retry with a random 1-5 s sleep.
//
// The retrying proxy wrapped around an SDK client: any call answered 429 or
// 5xx (or not answered) sleeps a uniformly random 1 to 5 seconds and tries
// again, for as long as it takes. It reads no header and keeps no state
// between calls, so it neither paces itself nor knows when a window resets;
// the random sleep is all that spreads the retries out.
#include <atomic>

#include "portal_call.hpp"
#include "strategies.hpp"
#include "worker_pool.hpp"

namespace ratchet::bench {

RunResult run_blind_retry(const BenchSetup& setup) {
  auto [result, client] = start_strategy(setup);
  if (!client) return result;
  std::atomic<std::size_t> next_job{0};

  const auto run = run_workers(setup.workers, setup.deadline, [&](int worker, std::stop_token stop) {
    WorkerRandom random(setup.seed, worker);
    for (std::size_t job = next_job++; job < setup.movies.size() && !stop.stop_requested();
         job = next_job++) {
      JobRecord& record = result.jobs[job];
      bool fatal = false;
      for (std::size_t p = 0; p < kPortals && !fatal; ++p) {
        while (!record.ratings[p]) {
          const auto call = call_portal(*client, setup.portals[p], setup.movies[job], stop);
          if (call.ok()) {
            record.ratings[p] = call.rating;
          } else if (!call.transient()) {
            fatal = true;
            break;
          } else {
            const auto pause = std::chrono::duration<double>(random.uniform(1.0, 5.0));
            const auto until = std::chrono::system_clock::now() +
                               std::chrono::duration_cast<std::chrono::system_clock::duration>(pause);
            if (!sleep_until(until, stop)) return;
          }
        }
      }
      record.completed = !fatal;
    }
  });
  result.makespan_s = run.seconds;
  if (run.cut_off) result.note = "cut off at the deadline";
  return result;
}

}  // namespace ratchet::bench
