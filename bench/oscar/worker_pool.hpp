// Runs one strategy's workers: `workers` threads each calling
// fn(worker_index, stop), returning when all have returned, and asking them
// to stop once `limit` has passed. Also times the run.
//
// Thread-safety: run_workers blocks the calling thread; fn runs on the
// workers, concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

namespace ratchet::bench {

struct PoolRun {
  double seconds = 0;    // from the first worker's start until the last returned
  bool cut_off = false;  // the limit passed before every worker returned
};

inline PoolRun run_workers(int workers, std::chrono::steady_clock::duration limit,
                           const std::function<void(int, std::stop_token)>& fn) {
  std::stop_source stop;
  std::mutex mu;
  std::condition_variable all_done;
  int running = workers;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      fn(i, stop.get_token());
      std::lock_guard lock(mu);
      if (--running == 0) all_done.notify_all();
    });
  }
  PoolRun run;
  {
    std::unique_lock lock(mu);
    run.cut_off = !all_done.wait_until(lock, start + limit, [&] { return running == 0; });
  }
  if (run.cut_off) stop.request_stop();
  threads.clear();  // joins
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace ratchet::bench
