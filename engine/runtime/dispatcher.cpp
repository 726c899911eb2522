#include "runtime/dispatcher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/expired_leases.hpp"

namespace ratchet::runtime {

Dispatcher::Dispatcher(const SchedulerOptions& options, const ExecutorEnv& env, const JobTypes& types,
                       HeldJobs& held)
    : options_(options), env_(env), types_(types), held_(held) {}

void Dispatcher::start() {
  thread_ = std::jthread([this](std::stop_token st) { dispatch_loop(st); });
}

void Dispatcher::stop() {
  thread_.request_stop();
  held_.room_cv.notify_all();
  wake();
  if (thread_.joinable()) thread_.join();
}

void Dispatcher::wake() {
  std::lock_guard lock(wake_mu_);
  wake_pending_ = true;
  if (waiting_ != nullptr) waiting_->request_stop();
}

void Dispatcher::wake_at(TimePoint at) {
  std::lock_guard lock(wake_mu_);
  if (!next_due_ || at < *next_due_) {
    next_due_ = at;
    // The dispatcher sleeps towards a later deadline: wake it to shorten it.
    if (waiting_ != nullptr) waiting_->request_stop();
  }
}

void Dispatcher::wait_for_work(TimePoint deadline, std::stop_token stop) {
  std::stop_source local;
  {
    std::lock_guard lock(wake_mu_);
    if (wake_pending_) {
      wake_pending_ = false;
      return;
    }
    if (next_due_) {
      if (*next_due_ <= env_.run.clock->now()) {
        next_due_.reset();
        return;
      }
      deadline = std::min(deadline, *next_due_);
    }
    waiting_ = &local;
  }
  {
    std::stop_callback on_stop(stop, [&] { local.request_stop(); });
    env_.run.clock->wait_until(deadline, local.get_token());
  }
  std::lock_guard lock(wake_mu_);
  waiting_ = nullptr;
  wake_pending_ = false;
  if (next_due_ && *next_due_ <= env_.run.clock->now()) next_due_.reset();
}

void Dispatcher::dispatch_loop(std::stop_token stop) {
  const std::size_t batch = held_.batch;
  while (!stop.stop_requested()) {
    int want = 0;
    {
      std::unique_lock lock(held_.mu);
      // Refill when the queue ahead of the workers runs low, up to one batch
      // ahead of them.
      held_.room_cv.wait(lock, stop, [&] { return held_.ready.size() <= batch / 2; });
      if (stop.stop_requested()) return;
      want = static_cast<int>(2 * batch) - held_.running - static_cast<int>(held_.ready.size());
    }
    if (want <= 0) {
      std::unique_lock lock(held_.mu);
      held_.room_cv.wait(lock, stop, [&] {
        return static_cast<int>(2 * batch) - held_.running - static_cast<int>(held_.ready.size()) > 0;
      });
      continue;
    }
    TimePoint now = env_.run.clock->now();
    store::ClaimRequest req{env_.run.owner,
                            store::to_micros(now),
                            store::to_micros(now + env_.run.lease),
                            want,
                            types_.names(),
                            options_.queues,
                            options_.max_lease_expiries};
    if (req.types.empty()) {
      wait_for_work(now + options_.poll_interval, stop);
      continue;
    }
    if (env_.run.store->stalled()) {
      // Looks again at least every poll interval of real time: a claim is
      // also what finds out that the lock is gone.
      env_.run.store->wait_while_stalled(
          stop, std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.poll_interval));
      continue;
    }
    auto claimed = env_.run.store->write([&](store::JobStore& s) {
      // Timed once the write lock is held: the wait for it can last up to
      // busy_timeout, and a lease timed before it was already over when the
      // claim committed (the jobs then counted a lease expiry, "crashed or
      // hung", though this worker was running them).
      const TimePoint at = env_.run.clock->now();
      req.now = store::to_micros(at);
      req.lease_until = store::to_micros(at + env_.run.lease);
      // Read when the claim runs, after the outage that kept it waiting: a
      // lease that ran out then, or within a heartbeat of its end (its
      // owner's next renewal), was not its owner's crash.
      req.outages.clear();
      for (const store::Outage& o : env_.run.store->write_outages()) {
        req.outages.emplace_back(store::to_micros(o.from), store::to_micros(o.to + options_.heartbeat));
      }
      return s.claim(req);
    });
    if (!claimed) {
      spdlog::error("claiming jobs failed: {}", claimed.error().to_string());
      if (!env_.run.store->stalled()) wait_for_work(now + options_.poll_interval, stop);
      continue;
    }
    publish_expired_leases(*env_.events, claimed->expired);
    std::size_t got = claimed->jobs.size();
    {
      std::lock_guard lock(held_.mu);
      held_.more_fresh_in_store =
          claimed->more_due && (claimed->jobs.empty() || !claimed->jobs.back().resumed);
      for (auto& j : claimed->jobs) {
        // A resumed job often holds a reserved limiter slot that is only good
        // around its time: it goes ahead of fresh jobs already waiting here.
        auto at = j.resumed ? std::find_if(held_.ready.begin(), held_.ready.end(),
                                           [](const store::ClaimedJob& r) { return !r.resumed; })
                            : held_.ready.end();
        j.claim_seq = ++held_.claim_seq;
        held_.ready.insert(at, std::move(j));
      }
      held_.publish_backlog();
    }
    // Wake as many workers as there are new jobs, not every idle one.
    if (got >= static_cast<std::size_t>(options_.workers)) {
      held_.work_cv.notify_all();
    } else {
      for (std::size_t i = 0; i < got; ++i) held_.work_cv.notify_one();
    }
    if (!claimed->expired.empty()) continue;  // taken-over jobs may be claimable now
    if (got < static_cast<std::size_t>(want)) {
      // Sleep until the next job falls due, or a poll interval at most (jobs
      // enqueued by other processes on this database wake nobody here).
      TimePoint until = now + options_.poll_interval;
      if (claimed->next_run_at) until = std::min(until, store::from_micros(*claimed->next_run_at));
      wait_for_work(until, stop);
    }
  }
}

}  // namespace ratchet::runtime
