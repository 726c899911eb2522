#include "runtime/scheduler.hpp"

#include <spdlog/spdlog.h>

namespace ratchet::runtime {

Scheduler::Scheduler(SchedulerOptions options, ExecutorEnv env, const JobTypes& types,
                     std::function<void()> on_job_done)
    : options_(std::move(options)),
      env_(std::move(env)),
      held_(options_.workers),
      dispatcher_(options_, env_, types, held_),
      finisher_(env_, held_, dispatcher_, std::move(on_job_done)),
      workers_(options_, env_, types, held_, finisher_),
      heartbeat_(options_, env_, held_) {}

Scheduler::~Scheduler() { stop(std::chrono::seconds(0)); }

void Scheduler::start() {
  if (started_) return;
  started_ = true;
  {
    std::lock_guard lock(held_.mu);
    held_.stopping = false;
  }
  // spdlog makes its registry on first use: made here, before the threads
  // that log, none of them races to make it (ThreadSanitizer cannot see the
  // guard inside the prebuilt library, and reported the race).
  (void)spdlog::default_logger_raw();
  finisher_.start();
  workers_.start();
  // Jobs other processes enqueue, retry or release wake the dispatcher at
  // once where the store can hear them (PostgreSQL); polling finds the rest.
  env_.run.store->on_new_work([this] { wake(); });
  dispatcher_.start();
  heartbeat_.start();
}

void Scheduler::wake() { dispatcher_.wake(); }

void Scheduler::wake_at(TimePoint at) { dispatcher_.wake_at(at); }

void Scheduler::stop(std::chrono::steady_clock::duration grace) {
  if (!started_) return;
  env_.run.store->on_new_work({});
  // The dispatcher first, so no claim lands in the queue after it is emptied.
  dispatcher_.stop();
  workers_.stop(grace);
  finisher_.stop();
  heartbeat_.stop();
  started_ = false;
}

}  // namespace ratchet::runtime
