#include "runtime/scheduler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

namespace ratchet::runtime {

Scheduler::Scheduler(SchedulerOptions options, ExecutorEnv env, const JobTypes& types,
                     std::function<void()> on_job_done)
    : options_(std::move(options)),
      env_(std::move(env)),
      types_(types),
      on_job_done_(std::move(on_job_done)) {}

Scheduler::~Scheduler() { stop(std::chrono::seconds(0)); }

void Scheduler::start() {
  if (started_) return;
  started_ = true;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  {
    std::lock_guard lock(finish_mu_);
    finisher_stop_ = false;
  }
  // spdlog makes its registry on first use: made here, before the threads
  // that log, none of them races to make it (ThreadSanitizer cannot see the
  // guard inside the prebuilt library, and reported the race).
  (void)spdlog::default_logger_raw();
  finisher_ = std::thread([this] { finisher_loop(); });
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  // Jobs other processes enqueue, retry or release wake the dispatcher at
  // once where the store can hear them (PostgreSQL); polling finds the rest.
  env_.run.store->on_new_work([this] { wake(); });
  dispatcher_ = std::jthread([this](std::stop_token st) { dispatch_loop(st); });
  heartbeat_ = std::jthread([this](std::stop_token st) { heartbeat_loop(st); });
}

void Scheduler::wake() {
  std::lock_guard lock(wake_mu_);
  wake_pending_ = true;
  if (waiting_ != nullptr) waiting_->request_stop();
}

void Scheduler::wake_at(TimePoint at) {
  std::lock_guard lock(wake_mu_);
  if (!next_due_ || at < *next_due_) {
    next_due_ = at;
    // The dispatcher sleeps towards a later deadline: wake it to shorten it.
    if (waiting_ != nullptr) waiting_->request_stop();
  }
}

void Scheduler::wait_for_work(TimePoint deadline, std::stop_token stop) {
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

void Scheduler::dispatch_loop(std::stop_token stop) {
  const std::size_t batch = static_cast<std::size_t>(options_.workers);
  while (!stop.stop_requested()) {
    int want = 0;
    {
      std::unique_lock lock(mu_);
      // Refill when the queue ahead of the workers runs low, up to one batch
      // ahead of them.
      room_cv_.wait(lock, stop, [&] { return ready_.size() <= batch / 2; });
      if (stop.stop_requested()) return;
      want = static_cast<int>(2 * batch) - running_ - static_cast<int>(ready_.size());
    }
    if (want <= 0) {
      std::unique_lock lock(mu_);
      room_cv_.wait(lock, stop, [&] {
        return static_cast<int>(2 * batch) - running_ - static_cast<int>(ready_.size()) > 0;
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
    auto claimed = env_.run.store->write([&](store::JobStore& s) { return s.claim(req); });
    if (!claimed) {
      spdlog::error("claiming jobs failed: {}", claimed.error().to_string());
      if (!env_.run.store->stalled()) wait_for_work(now + options_.poll_interval, stop);
      continue;
    }
    for (const auto& e : claimed->expired) {
      JobEvent ev;
      ev.kind = e.dead ? JobEvent::Kind::kDead : JobEvent::Kind::kFailed;
      ev.id = e.id;
      ev.type = e.type;
      ev.attempt = e.attempt;
      ev.error = e.error;
      env_.events->publish(ev);
    }
    std::size_t got = claimed->jobs.size();
    if (got > 0) {
      std::lock_guard lock(mu_);
      for (auto& j : claimed->jobs) {
        // A resumed job often holds a reserved limiter slot that is only good
        // around its time: it goes ahead of fresh jobs already waiting here.
        auto at = j.resumed ? std::find_if(ready_.begin(), ready_.end(),
                                           [](const store::ClaimedJob& r) { return !r.resumed; })
                            : ready_.end();
        j.claim_seq = ++claim_seq_;
        ready_.insert(at, std::move(j));
      }
    }
    // Wake as many workers as there are new jobs, not every idle one.
    if (got >= static_cast<std::size_t>(options_.workers)) {
      work_cv_.notify_all();
    } else {
      for (std::size_t i = 0; i < got; ++i) work_cv_.notify_one();
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

bool Scheduler::claim_wanted() const {
  const auto batch = static_cast<std::size_t>(options_.workers);
  const auto held = static_cast<std::size_t>(running_) + ready_.size();
  return ready_.size() <= batch / 2 && held < 2 * batch;
}

void Scheduler::worker_loop() {
  while (true) {
    store::ClaimedJob job;
    bool wanted = false;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !ready_.empty() || stopping_; });
      if (stopping_) return;
      job = std::move(ready_.front());
      ready_.pop_front();
      ++running_;
      wanted = claim_wanted();
    }
    if (wanted) room_cv_.notify_one();
    auto type = types_.find(job.type);
    JobRun run(env_.run, std::move(job));
    const ClaimKey key{run.job_id(), run.job().token};
    {
      std::lock_guard lock(mu_);
      active_[key] = &run;
      if (stopping_) run.request_stop();
    }
    Ending end = execute(run, type.get(), env_);
    {
      std::lock_guard lock(mu_);
      active_.erase(key);
      finishing_[key] = run.lease_until();
    }
    finish(key, std::move(end));
  }
}

void Scheduler::finish(ClaimKey key, Ending end) {
  if (!end.write) {
    finished(key, end, store::LeaseWrite{});
    return;
  }
  auto written = std::make_shared<store::LeaseWrite>();
  auto write = std::move(end.write);
  const std::optional<TimePoint> lease_until = end.lease_until;
  env_.run.store->write_async(
      [written, write = std::move(write)](store::JobStore& s) { *written = write(s); },
      [this, key, written, end = std::move(end)](std::optional<Error> error) mutable {
        // On the writer thread: hand over, never run host callbacks here.
        // Notified under the lock: once the finisher has run this, stop()
        // may destroy the scheduler.
        std::lock_guard lock(finish_mu_);
        finish_queue_.emplace_back([this, key, written, error = std::move(error), end = std::move(end)] {
          Result<store::LeaseWrite> w = *written;
          if (error) w = fail(*error);
          finished(key, end, w);
        });
        finish_cv_.notify_one();
      },
      lease_until);
}

void Scheduler::finisher_loop() {
  std::deque<std::function<void()>> batch;
  while (true) {
    {
      std::unique_lock lock(finish_mu_);
      finish_cv_.wait(lock, [&] { return !finish_queue_.empty() || finisher_stop_; });
      if (finish_queue_.empty()) return;
      batch.swap(finish_queue_);
    }
    for (auto& f : batch) f();
    batch.clear();
  }
}

void Scheduler::finished(ClaimKey key, const Ending& end, const Result<store::LeaseWrite>& written) {
  if (end.after) end.after(written);
  if (end.parked_until && written && written->held) wake_at(*end.parked_until);
  bool idle = false;
  bool wanted = false;
  {
    std::lock_guard lock(mu_);
    finishing_.erase(key);
    --running_;
    idle = running_ == 0 && ready_.empty();
    wanted = claim_wanted();
  }
  if (wanted) room_cv_.notify_one();
  idle_cv_.notify_all();
  // Whoever drains looks again once this engine has nothing left in hand
  // (while it has, some job of its types is still pending).
  if (idle && on_job_done_) on_job_done_();
}

void Scheduler::heartbeat_loop(std::stop_token stop) {
  const Clock& clock = *env_.run.clock;
  while (clock.wait_until(clock.now() + options_.heartbeat, stop)) {
    clock_watch_.check(clock);
    std::vector<ClaimKey> claims;
    std::uint64_t asked_through = 0;
    // The renewal protects every lease it renews: it may wait for a locked
    // database as long as the longest of them lasts.
    TimePoint longest{};
    {
      std::lock_guard lock(mu_);
      asked_through = claim_seq_;
      for (const auto& [key, run] : active_) {
        claims.push_back(key);
        longest = std::max(longest, run->lease_until());
      }
      for (const auto& [key, until] : finishing_) {
        claims.push_back(key);
        longest = std::max(longest, until);
      }
      for (const auto& j : ready_) {
        claims.emplace_back(j.id, j.token);
        longest = std::max(longest, store::from_micros(j.lease_until));
      }
    }
    if (claims.empty()) continue;
    store::Micros renewed_to = 0;
    auto held = env_.run.store->write_under_lease(longest, [&](store::JobStore& s) {
      // Read when the write runs: a renewal that waited for a lock does not
      // revive a lease that expired meanwhile.
      const TimePoint now = clock.now();
      renewed_to = store::to_micros(now + env_.run.lease);
      return s.renew(env_.run.owner, claims, renewed_to, store::to_micros(now));
    });
    if (!held) {
      spdlog::error("renewing leases failed: {}", held.error().to_string());
      continue;
    }
    // Claims the fence refused (lost, or older than another claim of the
    // same job) are absent.
    std::map<ClaimKey, bool> still;
    for (const auto& r : *held) still[{r.id, r.token}] = r.cancel_requested;
    std::lock_guard lock(mu_);
    // A job claimed while the renewal ran (perhaps one whose earlier run was
    // ending then) was not asked about: its absence says nothing.
    for (const auto& [key, run] : active_) {
      if (run->job().claim_seq > asked_through) continue;
      auto it = still.find(key);
      if (it == still.end()) {
        run->mark_lost();
        continue;
      }
      run->lease_renewed(renewed_to);
      if (it->second) run->request_cancel();
    }
    for (auto& j : ready_) {
      if (j.claim_seq <= asked_through && still.contains({j.id, j.token})) j.lease_until = renewed_to;
    }
    std::erase_if(ready_, [&](const store::ClaimedJob& j) {
      return j.claim_seq <= asked_through && !still.contains({j.id, j.token});
    });
  }
}

void Scheduler::stop(std::chrono::steady_clock::duration grace) {
  if (!started_) return;
  env_.run.store->on_new_work({});
  // The dispatcher first, so no claim lands in ready_ after it is emptied.
  dispatcher_.request_stop();
  room_cv_.notify_all();
  wake();
  if (dispatcher_.joinable()) dispatcher_.join();
  std::deque<store::ClaimedJob> unstarted;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (const auto& [id, run] : active_) run->request_stop();
    unstarted.swap(ready_);
  }
  work_cv_.notify_all();
  if (!unstarted.empty()) {
    store::Micros now = store::to_micros(env_.run.clock->now());
    auto w = env_.run.store->write([&](store::JobStore& s) {
      for (const auto& j : unstarted)
        s.release(j.id, store::Fence{env_.run.owner, j.token}, "engine stopping before the job started", now);
    });
    if (!w) spdlog::error("releasing unstarted jobs failed: {}", w.error().to_string());
  }
  {
    std::unique_lock lock(mu_);
    if (!idle_cv_.wait_for(lock, grace, [&] { return running_ == 0; })) {
      for (const auto& [id, run] : active_) run->abort();
    }
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
  {
    // Runs interrupted after the grace period still record how they ended.
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return running_ == 0; });
  }
  {
    std::lock_guard lock(finish_mu_);
    finisher_stop_ = true;
  }
  finish_cv_.notify_all();
  if (finisher_.joinable()) finisher_.join();
  heartbeat_.request_stop();
  if (heartbeat_.joinable()) heartbeat_.join();
  started_ = false;
}

}  // namespace ratchet::runtime
