#include "runtime/worker_pool.hpp"

#include <spdlog/spdlog.h>

#include <deque>

namespace ratchet::runtime {

WorkerPool::WorkerPool(const SchedulerOptions& options, const ExecutorEnv& env, const JobTypes& types,
                       HeldJobs& held, Finisher& finisher)
    : options_(options), env_(env), types_(types), held_(held), finisher_(finisher) {}

void WorkerPool::start() {
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

void WorkerPool::worker_loop() {
  while (true) {
    store::ClaimedJob job;
    bool wanted = false;
    {
      std::unique_lock lock(held_.mu);
      held_.work_cv.wait(lock, [&] { return !held_.ready.empty() || held_.stopping; });
      if (held_.stopping) return;
      job = std::move(held_.ready.front());
      held_.ready.pop_front();
      held_.publish_backlog();
      ++held_.running;
      wanted = held_.claim_wanted();
    }
    if (wanted) held_.room_cv.notify_one();
    auto type = types_.find(job.type);
    JobRun run(env_.run, std::move(job));
    const ClaimKey key{run.job_id(), run.job().token};
    {
      std::lock_guard lock(held_.mu);
      held_.active[key] = &run;
      if (held_.stopping) run.request_stop();
    }
    Ending end = execute(run, type.get(), env_);
    {
      std::lock_guard lock(held_.mu);
      held_.active.erase(key);
      held_.finishing[key] = run.lease_until();
    }
    finisher_.finish(key, std::move(end));
  }
}

void WorkerPool::stop(std::chrono::steady_clock::duration grace) {
  std::deque<store::ClaimedJob> unstarted;
  {
    std::lock_guard lock(held_.mu);
    held_.stopping = true;
    for (const auto& [id, run] : held_.active) run->request_stop();
    unstarted.swap(held_.ready);
  }
  held_.work_cv.notify_all();
  if (!unstarted.empty()) {
    store::Micros now = store::to_micros(env_.run.clock->now());
    auto w = env_.run.store->write([&](store::JobStore& s) {
      for (const auto& j : unstarted)
        s.release(j.id, store::Fence{env_.run.owner, j.token}, "engine stopping before the job started", now);
    });
    if (!w) spdlog::error("releasing unstarted jobs failed: {}", w.error().to_string());
  }
  {
    std::unique_lock lock(held_.mu);
    if (!held_.idle_cv.wait_for(lock, grace, [&] { return held_.running == 0; })) {
      for (const auto& [id, run] : held_.active) run->abort();
    }
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  {
    // Runs interrupted after the grace period still record how they ended.
    std::unique_lock lock(held_.mu);
    held_.idle_cv.wait(lock, [&] { return held_.running == 0; });
  }
  // Nothing parked here comes back here: the other processes take it at its
  // time, not a second later.
  auto w = env_.run.store->write([&](store::JobStore& s) { return s.disown_parked(env_.run.owner); });
  if (!w) spdlog::warn("handing parked jobs to other processes failed: {}", w.error().to_string());
}

}  // namespace ratchet::runtime
